import fc from "fast-check";
import { IPNet } from "../base/cidr.ts";
import { evaluate } from "./evaluate.ts";
import { compile } from "./plan.ts";
import { check } from "../../tests/prop.ts";
import {
  clusterOf,
  type Json,
  nsJson,
  podJson,
  policyJson,
  probeAddr,
  simulate,
} from "../../tests/netpol_fixture.ts";

const CIDRS = {
  n1: [IPNet.parse("10.99.1.0/24"), IPNet.parse("fd99::1:0/112")],
  n2: [IPNet.parse("10.99.2.0/24"), IPNet.parse("fd99::2:0/112")],
};
const label = fc.record({
  app: fc.constantFrom("a", "b"),
  tier: fc.option(fc.constantFrom("x", "y"), { nil: undefined }),
})
  .map((l) =>
    Object.fromEntries(Object.entries(l).filter(([, v]) => v !== undefined)) as Record<string, string>
  );
const selector = fc.oneof(
  fc.constant({}),
  label.map((l) => ({ matchLabels: l })),
  fc.record({
    key: fc.constantFrom("app", "tier"),
    op: fc.constantFrom("In", "NotIn", "Exists", "DoesNotExist"),
    v: fc.constantFrom("a", "b", "x"),
  }).map((e) => ({
    matchExpressions: [{
      key: e.key,
      operator: e.op,
      ...(e.op === "In" || e.op === "NotIn" ? { values: [e.v] } : {}),
    }],
  })),
);
const peer = fc.oneof(
  selector.map((s) => ({ podSelector: s })),
  selector.map((s) => ({ namespaceSelector: s })),
  fc.tuple(selector, selector).map(([a, b]) => ({ podSelector: a, namespaceSelector: b })),
  fc.constantFrom(
    { ipBlock: { cidr: "10.99.0.0/16", except: ["10.99.2.0/24"] } },
    { ipBlock: { cidr: "10.99.1.0/24" } },
    { ipBlock: { cidr: "fd99::/96", except: ["fd99::1:0/112"] } },
  ),
);
const port = fc.oneof(
  fc.constantFrom({ port: 80 }, { protocol: "UDP", port: 53 }, { port: 80, endPort: 90 }, {
    protocol: "UDP",
  }),
  fc.constantFrom({ port: "http" }, { protocol: "UDP", port: "dns" }),
);
const rule = (k: "from" | "to") =>
  fc.record({ peers: fc.array(peer, { maxLength: 2 }), ports: fc.array(port, { maxLength: 2 }) }).map((
    r,
  ) => ({
    ...(r.peers.length ? { [k]: r.peers } : {}),
    ...(r.ports.length ? { ports: r.ports } : {}),
  }));
const policy = fc.record({
  ns: fc.constantFrom("x", "y"),
  podSelector: selector,
  ingress: fc.option(fc.array(rule("from"), { maxLength: 2 }), { nil: undefined }),
  egress: fc.option(fc.array(rule("to"), { maxLength: 2 }), { nil: undefined }),
  types: fc.constantFrom(undefined, ["Ingress"], ["Egress"], ["Ingress", "Egress"]),
});
const pod = fc.record({
  ns: fc.constantFrom("x", "y"),
  labels: label,
  http: fc.boolean(),
  dns: fc.boolean(),
});

Deno.test("netpol property: the compiled plans give the API model's verdict for every pair, port and family", () => {
  check(
    fc.property(
      fc.array(pod, { minLength: 2, maxLength: 5 }),
      fc.array(policy, { maxLength: 3 }),
      fc.record({ x: label, y: label }),
      (pods, pols, nsl) => {
        const podObjs: Json[] = pods.map((p, i) => {
          const node = i % 2 === 0 ? "n1" : "n2";
          const n = node === "n1" ? 1 : 2;
          const ports: Json[] = [];
          if (p.http) ports.push({ name: "http", containerPort: 8080 + (i % 2), protocol: "TCP" });
          if (p.dns) ports.push({ name: "dns", containerPort: 53, protocol: "UDP" });
          return podJson(p.ns, `p${i}`, {
            labels: p.labels,
            ips: [`10.99.${n}.${10 + i}`, `fd99::${n}:${10 + i}`],
            node,
            ports,
          });
        });
        const polObjs = pols.map((p, i) =>
          policyJson(p.ns, `pol${i}`, {
            podSelector: p.podSelector,
            ...(p.ingress ? { ingress: p.ingress } : {}),
            ...(p.egress ? { egress: p.egress } : {}),
            ...(p.types ? { policyTypes: p.types } : {}),
          })
        );
        const c = clusterOf(podObjs, [nsJson("x", nsl.x), nsJson("y", nsl.y)], polObjs);
        const plans = {
          n1: compile({ cluster: c, node: "n1", podCidrs: CIDRS.n1 }),
          n2: compile({ cluster: c, node: "n2", podCidrs: CIDRS.n2 }),
        };
        const nodeOf = (ip: import("../base/cidr.ts").IPAddr) =>
          CIDRS.n1.some((x) => x.contains(ip))
            ? plans.n1
            : CIDRS.n2.some((x) => x.contains(ip))
            ? plans.n2
            : undefined;
        const ends = [...podObjs.map((_, i) => i), -1];
        for (const a of ends) {
          for (const b of ends) {
            if (a === b) continue;
            for (const f of [4, 6] as const) {
              const addr = (i: number) =>
                i < 0 ? probeAddr(f === 4 ? "10.99.3.7" : "fd99::3:7", f) : probeAddr(
                  f === 4
                    ? `10.99.${i % 2 === 0 ? 1 : 2}.${10 + i}`
                    : `fd99::${i % 2 === 0 ? 1 : 2}:${10 + i}`,
                  f,
                );
              for (
                const [proto, p] of [["TCP", 80], ["TCP", 85], ["TCP", 8080], ["TCP", 8081], ["UDP", 53], [
                  "UDP",
                  54,
                ]] as const
              ) {
                const want = evaluate(c, addr(a), addr(b), proto, p).allowed;
                const got = simulate(nodeOf, addr(a), addr(b), proto, p);
                if (want !== got) {
                  throw new Error(`p${a} -> p${b} ${proto}/${p} v${f}: model ${want}, plan ${got}`);
                }
              }
            }
          }
        }
      },
    ),
    100,
  );
});
