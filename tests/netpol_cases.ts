/**
 * The verdict matrix's cases, shared by the unit tests (the API model and the compiled plan) and the root
 * test (real traffic through the nft table): namespaces x, y, z with pods a, b, c each (labels `pod=<name>`,
 * namespaces `team=<name>`), pods of x on node n1, of y and z on n2, each with an IPv4 and an IPv6 address;
 * per case the policies and the probes with the verdict the API defines, written out by hand.
 * @module
 */

/** A probe: `from` and `to` pod (`ns/name`) or address, protocol, port, and whether it must pass. */
export interface Probe {
  from: string;
  to: string;
  proto: "TCP" | "UDP" | "SCTP";
  port: number;
  allowed: boolean;
}

/** One case: policies (as API objects: namespace, name, spec) and probes. */
export interface VerdictCase {
  name: string;
  policies: { ns: string; name: string; spec: Record<string, unknown> }[];
  probes: Probe[];
  /** Extra labels per pod key, for this case. */
  podLabels?: Record<string, Record<string, string>>;
}

/** The matrix's namespaces and their number (the address's third byte / group). */
export const NAMESPACES = ["x", "y", "z"] as const;
/** The pods of every namespace and their number (the address's last byte). */
export const PODS = ["a", "b", "c"] as const;

/** The IPv4 address of a pod key `ns/name`. */
export function podIp4(key: string): string {
  const [ns, p] = key.split("/");
  return `10.99.${NAMESPACES.indexOf(ns as "x") + 1}.${PODS.indexOf(p as "a") + 10}`;
}

/** The IPv6 address of a pod key. */
export function podIp6(key: string): string {
  const [ns, p] = key.split("/");
  return `fd99::${NAMESPACES.indexOf(ns as "x") + 1}:${PODS.indexOf(p as "a") + 10}`;
}

/** The node of a pod key: x on n1, y and z on n2. */
export function podNode(key: string): string {
  return key.startsWith("x/") ? "n1" : "n2";
}

/** Named container ports: x/a serves `http` on TCP 8080, every pod `dns` on UDP 53. */
export function podPorts(key: string): { name: string; containerPort: number; protocol: string }[] {
  const ports = [{ name: "dns", containerPort: 53, protocol: "UDP" }];
  if (key === "x/a") ports.push({ name: "http", containerPort: 8080, protocol: "TCP" });
  return ports;
}

const p = (
  from: string,
  to: string,
  port: number,
  allowed: boolean,
  proto: Probe["proto"] = "TCP",
): Probe => ({
  from,
  to,
  proto,
  port,
  allowed,
});

/** The cases. */
export const CASES: VerdictCase[] = [
  {
    name: "no policy: everything open",
    policies: [],
    probes: [p("x/a", "y/b", 80, true), p("y/b", "x/a", 80, true), p("x/b", "x/a", 53, true, "UDP")],
  },
  {
    name: "default deny ingress in x",
    policies: [{ ns: "x", name: "deny", spec: { podSelector: {} } }],
    probes: [
      p("y/a", "x/a", 80, false),
      p("x/b", "x/a", 80, false),
      p("x/b", "x/a", 53, false, "UDP"),
      p("x/a", "y/a", 80, true),
      p("y/a", "z/a", 80, true),
    ],
  },
  {
    name: "podSelector from the same namespace, TCP 80",
    policies: [{
      ns: "x",
      name: "b-to-a",
      spec: {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ from: [{ podSelector: { matchLabels: { pod: "b" } } }], ports: [{ port: 80 }] }],
      },
    }],
    probes: [
      p("x/b", "x/a", 80, true),
      p("x/b", "x/a", 81, false),
      p("x/b", "x/a", 80, false, "UDP"),
      p("x/c", "x/a", 80, false),
      p("y/b", "x/a", 80, false),
      p("y/b", "x/b", 80, true),
    ],
  },
  {
    name: "namespaceSelector",
    policies: [{
      ns: "x",
      name: "from-y",
      spec: {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: "y" } } }] }],
      },
    }],
    probes: [p("y/a", "x/a", 80, true), p("y/c", "x/a", 5000, true, "UDP"), p("x/b", "x/a", 80, false)],
  },
  {
    name: "namespaceSelector and podSelector combined",
    policies: [{
      ns: "x",
      name: "from-y-c",
      spec: {
        podSelector: {},
        ingress: [{
          from: [{
            namespaceSelector: { matchLabels: { team: "y" } },
            podSelector: { matchLabels: { pod: "c" } },
          }],
        }],
      },
    }],
    probes: [p("y/c", "x/a", 80, true), p("y/b", "x/a", 80, false), p("x/c", "x/a", 80, false)],
  },
  {
    name: "matchExpressions NotIn and Exists",
    policies: [{
      ns: "x",
      name: "expr",
      spec: {
        podSelector: { matchExpressions: [{ key: "pod", operator: "In", values: ["a", "b"] }] },
        ingress: [{
          from: [{
            namespaceSelector: { matchExpressions: [{ key: "team", operator: "Exists" }] },
            podSelector: { matchExpressions: [{ key: "pod", operator: "NotIn", values: ["a", "b"] }] },
          }],
        }],
      },
    }],
    probes: [
      p("z/c", "x/b", 80, true),
      p("z/a", "x/b", 80, false),
      p("x/a", "x/b", 80, false),
      p("z/a", "x/c", 80, true),
    ],
  },
  {
    name: "DoesNotExist and a changed label",
    podLabels: { "y/b": { quarantine: "yes" } },
    policies: [{
      ns: "x",
      name: "no-quarantine",
      spec: {
        podSelector: {},
        ingress: [{
          from: [{
            namespaceSelector: {},
            podSelector: { matchExpressions: [{ key: "quarantine", operator: "DoesNotExist" }] },
          }],
        }],
      },
    }],
    probes: [p("y/a", "x/a", 80, true), p("y/b", "x/a", 80, false)],
  },
  {
    name: "ipBlock with except",
    policies: [{
      ns: "x",
      name: "cidr",
      spec: {
        podSelector: {},
        ingress: [{
          from: [
            { ipBlock: { cidr: "10.99.0.0/16", except: ["10.99.2.0/24"] } },
            { ipBlock: { cidr: "fd99::/64", except: ["fd99::2:0/112"] } },
          ],
        }],
      },
    }],
    probes: [p("z/a", "x/a", 80, true), p("y/a", "x/a", 80, false), p("x/b", "x/a", 80, true)],
  },
  {
    name: "named port",
    policies: [{
      ns: "x",
      name: "http",
      spec: { podSelector: { matchLabels: { pod: "a" } }, ingress: [{ ports: [{ port: "http" }] }] },
    }],
    probes: [p("y/a", "x/a", 8080, true), p("y/a", "x/a", 80, false), p("y/a", "x/a", 8080, false, "UDP")],
  },
  {
    name: "port range (endPort)",
    policies: [{
      ns: "x",
      name: "range",
      spec: { podSelector: {}, ingress: [{ ports: [{ protocol: "UDP", port: 1000, endPort: 2000 }] }] },
    }],
    probes: [
      p("y/a", "x/a", 1000, true, "UDP"),
      p("y/a", "x/a", 2000, true, "UDP"),
      p("y/a", "x/a", 2001, false, "UDP"),
      p("y/a", "x/a", 1500, false, "TCP"),
    ],
  },
  {
    name: "SCTP",
    policies: [{
      ns: "x",
      name: "sctp",
      spec: { podSelector: {}, ingress: [{ ports: [{ protocol: "SCTP", port: 7000 }] }] },
    }],
    probes: [p("y/a", "x/a", 7000, true, "SCTP"), p("y/a", "x/a", 7000, false, "TCP")],
  },
  {
    name: "egress default deny and egress named port",
    policies: [{
      ns: "x",
      name: "dns-only",
      spec: {
        podSelector: { matchLabels: { pod: "a" } },
        policyTypes: ["Egress"],
        egress: [{
          to: [{ namespaceSelector: { matchLabels: { team: "z" } } }],
          ports: [{ protocol: "UDP", port: "dns" }],
        }],
      },
    }],
    probes: [
      p("x/a", "z/b", 53, true, "UDP"),
      p("x/a", "z/b", 54, false, "UDP"),
      p("x/a", "y/b", 53, false, "UDP"),
      p("x/a", "z/b", 80, false),
      p("y/b", "x/a", 80, true),
      p("x/b", "y/b", 80, true),
    ],
  },
  {
    name: "egress rules make Egress a default type",
    policies: [{
      ns: "x",
      name: "to-y",
      spec: { podSelector: {}, egress: [{ to: [{ namespaceSelector: { matchLabels: { team: "y" } } }] }] },
    }],
    probes: [p("x/a", "y/a", 80, true), p("x/a", "z/a", 80, false), p("y/a", "x/a", 80, false)],
  },
  {
    name: "several policies are a union",
    policies: [
      {
        ns: "x",
        name: "from-b",
        spec: {
          podSelector: { matchLabels: { pod: "a" } },
          ingress: [{ from: [{ podSelector: { matchLabels: { pod: "b" } } }] }],
        },
      },
      {
        ns: "x",
        name: "from-c",
        spec: {
          podSelector: { matchLabels: { pod: "a" } },
          ingress: [{ from: [{ podSelector: { matchLabels: { pod: "c" } } }] }],
        },
      },
    ],
    probes: [p("x/b", "x/a", 80, true), p("x/c", "x/a", 80, true), p("y/b", "x/a", 80, false)],
  },
  {
    name: "a policy the model refuses isolates its namespace both ways",
    policies: [{
      ns: "x",
      name: "bad",
      spec: { podSelector: { matchExpressions: [{ key: "pod", operator: "Near" }] }, ingress: [{}] },
    }],
    probes: [p("y/a", "x/a", 80, false), p("x/a", "y/a", 80, false), p("y/a", "z/a", 80, true)],
  },
  {
    name: "egress and ingress across namespaces both allow",
    policies: [
      {
        ns: "y",
        name: "eg",
        spec: { podSelector: {}, policyTypes: ["Egress"], egress: [{ ports: [{ port: 80 }] }] },
      },
      {
        ns: "x",
        name: "in",
        spec: { podSelector: {}, ingress: [{ ports: [{ port: 80 }, { port: 443 }] }] },
      },
    ],
    probes: [p("y/a", "x/a", 80, true), p("y/a", "x/a", 443, false), p("z/a", "x/a", 443, true)],
  },
];
