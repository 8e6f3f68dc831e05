/**
 * The NetworkPolicy scenarios of the verdict matrix (tests/netpol_matrix.ts), each with the grid the API's
 * semantics give (networking.k8s.io/v1), worked out by hand below — the table of expectations every enforcer
 * (kube-router, flanctl) is held to. A grid's rows are sources, its columns destinations; a cell is one
 * character per probe, in the order 80/TCP 81/TCP 80/UDP 81/UDP: `X` allowed, `.` denied.
 *
 * The model's labels: namespaces `ns: x|y|z`; pods `pod: a|b|c`, x/a `tier: web`, x/b `tier: db`. Container
 * ports named `serve-80-tcp`, `serve-80-udp`, `serve-81-tcp`, `serve-81-udp`.
 * @module
 */
import { policy, type Scenario } from "./netpol_matrix.ts";

const ALL_OPEN = `
      x/a   x/b   x/c   y/a   y/b   z/a   z/b
x/a   -     XXXX  XXXX  XXXX  XXXX  XXXX  XXXX
x/b   XXXX  -     XXXX  XXXX  XXXX  XXXX  XXXX
x/c   XXXX  XXXX  -     XXXX  XXXX  XXXX  XXXX
y/a   XXXX  XXXX  XXXX  -     XXXX  XXXX  XXXX
y/b   XXXX  XXXX  XXXX  XXXX  -     XXXX  XXXX
z/a   XXXX  XXXX  XXXX  XXXX  XXXX  -     XXXX
z/b   XXXX  XXXX  XXXX  XXXX  XXXX  XXXX  -
`;

/** No policy: every pod reaches every other on every port. */
export const OPEN: Scenario = { name: "no policy", policies: () => [], want: ALL_OPEN };

/**
 * Ingress, six policies at once:
 * - x/c: selected, policyTypes [Ingress], no rule → nothing reaches it.
 * - x/a: from pods `pod: b` of its own namespace (a podSelector alone) on 80/TCP; and (a second policy, a
 *   union) from every pod of namespaces `ns: y` on the port named serve-81-udp (81/UDP, resolved on x/a).
 * - y/b: from pods of namespaces `ns In (x, z)` that are `pod NotIn (c)` (both selectors in one peer: x/a,
 *   x/b, z/a, z/b) on TCP 80 with endPort 81.
 * - z/a: from ipBlock 10.244.0.0/16 except x/b's address /32, every port.
 * - z/b: from pods with a `tier` label in any namespace (`namespaceSelector: {}` + Exists) on 80/UDP.
 * - x/b, y/a: no policy selects them: open.
 */
export const INGRESS: Scenario = {
  name: "ingress",
  policies: (ips) => [
    policy("x", "deny-ingress-c", { podSelector: { matchLabels: { pod: "c" } }, policyTypes: ["Ingress"] }),
    policy("x", "a-from-b-tcp80", {
      podSelector: { matchLabels: { pod: "a" } },
      policyTypes: ["Ingress"],
      ingress: [{
        from: [{ podSelector: { matchLabels: { pod: "b" } } }],
        ports: [{ protocol: "TCP", port: 80 }],
      }],
    }),
    policy("x", "a-from-y-named-udp81", {
      podSelector: { matchExpressions: [{ key: "pod", operator: "In", values: ["a"] }] },
      policyTypes: ["Ingress"],
      ingress: [{
        from: [{ namespaceSelector: { matchLabels: { ns: "y" } } }],
        ports: [{ protocol: "UDP", port: "serve-81-udp" }],
      }],
    }),
    policy("y", "b-from-xz-not-c-range", {
      podSelector: { matchLabels: { pod: "b" } },
      policyTypes: ["Ingress"],
      ingress: [{
        from: [{
          namespaceSelector: { matchExpressions: [{ key: "ns", operator: "In", values: ["x", "z"] }] },
          podSelector: { matchExpressions: [{ key: "pod", operator: "NotIn", values: ["c"] }] },
        }],
        ports: [{ protocol: "TCP", port: 80, endPort: 81 }],
      }],
    }),
    policy("z", "a-from-ipblock-except", {
      podSelector: { matchLabels: { pod: "a" } },
      policyTypes: ["Ingress"],
      ingress: [{ from: [{ ipBlock: { cidr: "10.244.0.0/16", except: [`${ips.get("x/b")}/32`] } }] }],
    }),
    policy("z", "b-from-tiered-udp80", {
      podSelector: { matchLabels: { pod: "b" } },
      policyTypes: ["Ingress"],
      ingress: [{
        from: [{
          namespaceSelector: {},
          podSelector: { matchExpressions: [{ key: "tier", operator: "Exists" }] },
        }],
        ports: [{ protocol: "UDP", port: 80 }],
      }],
    }),
  ],
  want: `
      x/a   x/b   x/c   y/a   y/b   z/a   z/b
x/a   -     XXXX  ....  XXXX  XX..  XXXX  ..X.
x/b   X...  -     ....  XXXX  XX..  ....  ..X.
x/c   ....  XXXX  -     XXXX  ....  XXXX  ....
y/a   ...X  XXXX  ....  -     ....  XXXX  ....
y/b   ...X  XXXX  ....  XXXX  -     XXXX  ....
z/a   ....  XXXX  ....  XXXX  XX..  -     ....
z/b   ....  XXXX  ....  XXXX  XX..  XXXX  -
`,
};

/**
 * Egress, three policies at once:
 * - y/a: policyTypes [Egress], to ipBlock 10.244.0.0/16 except x/b's address, 80/UDP only.
 * - z/a, z/b (`tier DoesNotExist`): policyTypes [Egress], to pods `pod: a` of namespace z (a podSelector
 *   alone), every port: z/b reaches z/a, z/a reaches nothing (only itself).
 * - x/b: no policyTypes, an egress section → the API defaults policyTypes to [Ingress, Egress]: no ingress
 *   rule (nothing reaches x/b) and egress to every pod of namespaces `ns: y` on the port named serve-80-tcp
 *   (resolved on the destination: 80/TCP).
 */
export const EGRESS: Scenario = {
  name: "egress",
  policies: (ips) => [
    policy("y", "a-egress-ipblock-udp80", {
      podSelector: { matchLabels: { pod: "a" } },
      policyTypes: ["Egress"],
      egress: [{
        to: [{ ipBlock: { cidr: "10.244.0.0/16", except: [`${ips.get("x/b")}/32`] } }],
        ports: [{ protocol: "UDP", port: 80 }],
      }],
    }),
    policy("z", "untiered-egress-to-a", {
      podSelector: { matchExpressions: [{ key: "tier", operator: "DoesNotExist" }] },
      policyTypes: ["Egress"],
      egress: [{ to: [{ podSelector: { matchLabels: { pod: "a" } } }] }],
    }),
    policy("x", "b-egress-named-default-types", {
      podSelector: { matchLabels: { pod: "b" } },
      egress: [{
        to: [{ namespaceSelector: { matchLabels: { ns: "y" } } }],
        ports: [{ port: "serve-80-tcp" }],
      }],
    }),
  ],
  want: `
      x/a   x/b   x/c   y/a   y/b   z/a   z/b
x/a   -     ....  XXXX  XXXX  XXXX  XXXX  XXXX
x/b   ....  -     ....  X...  X...  ....  ....
x/c   XXXX  ....  -     XXXX  XXXX  XXXX  XXXX
y/a   ..X.  ....  ..X.  -     ..X.  ..X.  ..X.
y/b   XXXX  ....  XXXX  XXXX  -     XXXX  XXXX
z/a   ....  ....  ....  ....  ....  -     ....
z/b   ....  ....  ....  ....  ....  XXXX  -
`,
};

/** Every policy deleted: open again. */
export const DELETED: Scenario = { name: "policies deleted", policies: () => [], want: ALL_OPEN };

/** The scenarios in the order the matrix tests run them. */
export const SCENARIOS: Scenario[] = [OPEN, INGRESS, EGRESS, DELETED];
