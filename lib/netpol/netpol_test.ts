import { assert, assertEquals, assertMatch, assertThrows } from "../../tests/assert.ts";
import { IPAddr, IPNet } from "../base/cidr.ts";
import { evaluate } from "./evaluate.ts";
import { matches, NetpolModelError, parsePod, parsePolicy, parseSelector } from "./model.ts";
import { compile, type Plan } from "./plan.ts";
import { diffScript, fullScript } from "./render.ts";
import { merge, rangeText, subtract } from "./ranges.ts";
import { CASES } from "../../tests/netpol_cases.ts";
import {
  caseObjects,
  clusterOf,
  podJson,
  policyJson,
  probeAddr,
  simulate,
} from "../../tests/netpol_fixture.ts";

const CIDRS = {
  n1: [IPNet.parse("10.99.1.0/24"), IPNet.parse("fd99::1:0/112")],
  n2: [IPNet.parse("10.99.2.0/23"), IPNet.parse("fd99::2:0/111")],
};

function plans(c: ReturnType<typeof clusterOf>): Record<"n1" | "n2", Plan> {
  return {
    n1: compile({ cluster: c, node: "n1", podCidrs: CIDRS.n1 }),
    n2: compile({ cluster: c, node: "n2", podCidrs: CIDRS.n2 }),
  };
}

function nodeOf(p: Record<"n1" | "n2", Plan>) {
  return (ip: IPAddr) => {
    for (const n of ["n1", "n2"] as const) if (CIDRS[n].some((c) => c.contains(ip))) return p[n];
    return undefined;
  };
}

for (const c of CASES) {
  Deno.test(`netpol verdict matrix: ${c.name} (API model and compiled plan, v4 and v6)`, () => {
    const o = caseObjects(c);
    const cluster = clusterOf(o.pods, o.namespaces, o.policies);
    const p = plans(cluster);
    for (const pr of c.probes) {
      for (const f of [4, 6] as const) {
        const src = probeAddr(pr.from, f), dst = probeAddr(pr.to, f);
        const what = `${pr.from} -> ${pr.to} ${pr.proto}/${pr.port} v${f}`;
        assertEquals(evaluate(cluster, src, dst, pr.proto, pr.port).allowed, pr.allowed, `model: ${what}`);
        assertEquals(simulate(nodeOf(p), src, dst, pr.proto, pr.port), pr.allowed, `plan: ${what}`);
      }
    }
  });
}

Deno.test("netpol policyTypes default: Ingress always, Egress only with egress rules", () => {
  const a = parsePolicy(policyJson("x", "a", { podSelector: {} }));
  assertEquals(a.types, { ingress: true, egress: false });
  const b = parsePolicy(policyJson("x", "b", { podSelector: {}, egress: [{}] }));
  assertEquals(b.types, { ingress: true, egress: true });
  const c = parsePolicy(policyJson("x", "c", { podSelector: {}, policyTypes: ["Egress"] }));
  assertEquals(c.types, { ingress: false, egress: true });
  assertEquals(c.invalid, undefined);
});

Deno.test("netpol a refused policy fails closed, naming why", () => {
  for (
    const spec of [
      { podSelector: {}, ingress: [{ ports: [{ port: 70000 }] }] },
      { podSelector: {}, ingress: [{ ports: [{ port: "http", endPort: 90 }] }] },
      { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8", except: ["11.0.0.0/8"] } }] }] },
      { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8" }, podSelector: {} }] }] },
      { podSelector: { matchExpressions: [{ key: "k", operator: "In", values: [] }] } },
      { podSelector: {}, ingress: Array.from({ length: 300 }, () => ({})) },
      { podSelector: {}, policyTypes: ["Sideways"] },
      "junk",
    ]
  ) {
    const p = parsePolicy(policyJson("x", "p", spec as Record<string, unknown>));
    assert(p.invalid, JSON.stringify(spec).slice(0, 80));
    assertEquals(p.types, { ingress: true, egress: true });
    assertEquals([p.ingress.length, p.egress.length], [0, 0]);
  }
  assertThrows(() => parsePolicy({ metadata: { name: "p" } }), NetpolModelError);
  assertThrows(() => parsePod({ metadata: { namespace: "x", name: "Bad Name" } }), NetpolModelError);
});

Deno.test("netpol selectors: matchLabels and the four operators", () => {
  const s = parseSelector({
    matchLabels: { app: "web" },
    matchExpressions: [
      { key: "tier", operator: "In", values: ["a", "b"] },
      { key: "env", operator: "NotIn", values: ["prod"] },
      { key: "team", operator: "Exists" },
      { key: "legacy", operator: "DoesNotExist" },
    ],
  });
  assert(matches(s, { app: "web", tier: "a", team: "t" }));
  assert(matches(s, { app: "web", tier: "b", team: "t", env: "dev" }));
  assert(!matches(s, { app: "web", tier: "c", team: "t" }));
  assert(!matches(s, { app: "web", tier: "a", team: "t", env: "prod" }));
  assert(!matches(s, { app: "web", tier: "a" }));
  assert(!matches(s, { app: "web", tier: "a", team: "t", legacy: "" }));
  assert(matches(parseSelector({}), {}));
});

Deno.test("netpol pods: hostNetwork and finished pods are not pods for policy", () => {
  const c = clusterOf(
    [
      podJson("x", "h", { ips: ["10.99.1.50"], hostNetwork: true }),
      podJson("x", "done", { ips: ["10.99.1.51"], phase: "Succeeded" }),
      podJson("x", "a", { ips: ["10.99.1.52"] }),
    ],
    [],
    [policyJson("x", "deny", { podSelector: {} })],
  );
  const ip = (s: string) => IPAddr.parse(s);
  assert(evaluate(c, ip("10.99.1.52"), ip("10.99.1.50"), "TCP", 80).allowed);
  assert(evaluate(c, ip("10.99.1.52"), ip("10.99.1.51"), "TCP", 80).allowed);
  assert(!evaluate(c, ip("10.99.1.50"), ip("10.99.1.52"), "TCP", 80).allowed);
  const plan = compile({ cluster: c, node: "n1", podCidrs: [] });
  assertEquals([...plan.maps.in4.keys()], ["10.99.1.52"]);
});

Deno.test("netpol ranges: a CIDR without its excepts, merged with single addresses", () => {
  const r = subtract(IPNet.parse("10.0.0.0/24"), [IPNet.parse("10.0.0.64/26"), IPNet.parse("10.0.0.0/30")]);
  assertEquals(r.map((x) => rangeText(4, x)), ["10.0.0.4-10.0.0.63", "10.0.0.128-10.0.0.255"]);
  const m = merge([...r, [IPAddr.parse("10.0.0.64").value, IPAddr.parse("10.0.0.64").value], [3n, 3n]]);
  assertEquals(m.map((x) => rangeText(4, x)), [
    "0.0.0.3",
    "10.0.0.4-10.0.0.63",
    "10.0.0.64",
    "10.0.0.128-10.0.0.255",
  ]);
  assertEquals(subtract(IPNet.parse("fd00::/120"), [IPNet.parse("fd00::/121")]).map((x) => rangeText(6, x)), [
    "fd00::80-fd00::ff",
  ]);
});

Deno.test("netpol pending: a selected local pod without an address turns the pod-CIDR default deny on", () => {
  const pods = [podJson("x", "a", { ips: ["10.99.1.10"] }), podJson("x", "new", {})];
  const pol = [policyJson("x", "deny", { podSelector: {} })];
  const plan = compile({ cluster: clusterOf(pods, [], pol), node: "n1", podCidrs: CIDRS.n1 });
  assertEquals(plan.pending, { ingress: true, egress: false });
  const nodeOfN1 = (ip: IPAddr) => CIDRS.n1.some((c) => c.contains(ip)) ? plan : undefined;
  // An address of the node's pod CIDR the API has not named yet: closed; outside it, or unselected: open.
  assert(!simulate(nodeOfN1, IPAddr.parse("10.99.2.10"), IPAddr.parse("10.99.1.77"), "TCP", 80));
  assert(simulate(nodeOfN1, IPAddr.parse("10.99.1.77"), IPAddr.parse("10.99.2.10"), "TCP", 80));
  assert(/ip daddr @local4 drop/.test(fullScript(plan)));
  // Once no pending pod is selected, the default deny goes.
  const open = compile({ cluster: clusterOf(pods.slice(0, 1), [], pol), node: "n1", podCidrs: CIDRS.n1 });
  assertEquals(open.pending, { ingress: false, egress: false });
  assert(!/@local4 drop/.test(fullScript(open)));
  assert(/flush chain inet flanctl-netpol ingress/.test(diffScript(plan, open)));
});

Deno.test("netpol diff: a label change touches only the sets and chains it changes", () => {
  const c = CASES.find((x) => x.name.startsWith("podSelector from the same namespace"))!;
  const o = caseObjects(c);
  const before = compile({
    cluster: clusterOf(o.pods, o.namespaces, o.policies),
    node: "n1",
    podCidrs: CIDRS.n1,
  });
  assertEquals(diffScript(before, before), "");
  // x/c gets label pod=b: it joins the peer set of x/a's rule; nothing else changes.
  const pods = o.pods.map((p) =>
    (p.metadata as { name: string; namespace: string }).name === "c" &&
      (p.metadata as { namespace: string }).namespace === "x"
      ? podJson("x", "c", { labels: { pod: "b" }, ips: ["10.99.1.12", "fd99::1:12"], node: "n1" })
      : p
  );
  const after = compile({
    cluster: clusterOf(pods, o.namespaces, o.policies),
    node: "n1",
    podCidrs: CIDRS.n1,
  });
  const d = diffScript(before, after).trim().split("\n");
  assertEquals(d.length, 2, d.join("\n"));
  assertMatch(d[0], /^add element inet flanctl-netpol p-\w+-4 \{ 10\.99\.1\.12 \}$/);
  assertMatch(d[1], /^add element inet flanctl-netpol p-\w+-6 \{ fd99::1:12 \}$/);
  // The policy deleted: its chain, map entries and sets go; the fixed sets stay.
  const none = compile({ cluster: clusterOf(pods, o.namespaces, []), node: "n1", podCidrs: CIDRS.n1 });
  const gone = diffScript(after, none);
  assertMatch(gone, /delete element inet flanctl-netpol in4 \{ 10\.99\.1\.10 \}/);
  assertMatch(gone, /delete chain inet flanctl-netpol in-\w+/);
  assertMatch(gone, /delete set inet flanctl-netpol p-\w+-4/);
  assert(!/known4|local4/.test(gone));
});

Deno.test("netpol sets: rules with the same peers share one set; relative peers stay per namespace", () => {
  const from = [{ namespaceSelector: { matchLabels: { team: "y" } } }];
  const local = [{ podSelector: { matchLabels: { pod: "b" } } }];
  const pods = [
    podJson("x", "a", { labels: { pod: "a" }, ips: ["10.99.1.10"] }),
    podJson("y", "a", { ips: ["10.99.1.20"] }),
  ];
  const pols = [
    policyJson("x", "p1", { podSelector: {}, ingress: [{ from }, { from: local }] }),
    policyJson("x", "p2", { podSelector: {}, ingress: [{ from, ports: [{ port: 80 }] }] }),
    policyJson("y", "p3", { podSelector: {}, ingress: [{ from, ports: [{ port: 81 }] }, { from: local }] }),
  ];
  const plan = compile({ cluster: clusterOf(pods, [], pols), node: "n1", podCidrs: [] });
  const peerSets = [...plan.sets.keys()].filter((n) => n.startsWith("p-"));
  // one set for the team=y namespaces (all three policies), one for pod=b in x, one for pod=b in y
  assertEquals(peerSets.length, 3, peerSets.join(" "));
});

Deno.test("netpol rules: the ports of one protocol are one rule, several through a shared named set", () => {
  const pods = [podJson("x", "a", { ips: ["10.99.1.10"], ports: [{ name: "http", containerPort: 8080 }] })];
  const pols = [policyJson("x", "p", {
    podSelector: {},
    ingress: [{
      ports: [{ port: 80, endPort: 85 }, { port: 86 }, { port: "http" }, { protocol: "UDP", port: 53 }, {
        port: 443,
      }],
    }],
  })];
  const plan = compile({ cluster: clusterOf(pods, [], pols), node: "n1", podCidrs: [] });
  const text = fullScript(plan);
  assertMatch(text, /meta l4proto tcp th dport @(q-\w+) accept comment "x\/p ingress\[0\]"/);
  const set = /th dport @(q-\w+)/.exec(text)![1];
  assertMatch(text, new RegExp(`add element inet flanctl-netpol ${set} \\{ 80-86, 443, 8080 \\}`));
  assertMatch(text, /meta l4proto udp th dport 53 accept/);
});

Deno.test("netpol rules: a rule that an earlier rule of the chain already matches is written once", () => {
  const pods = [podJson("x", "a", { labels: { app: "a" }, ips: ["10.99.1.10"] })];
  const allow = (port: number) => ({
    from: [{ podSelector: { matchLabels: { app: "b" } } }],
    ports: [{ port }],
  });
  const pols = [
    policyJson("x", "p1", { podSelector: {}, ingress: [allow(80)] }),
    policyJson("x", "p2", { podSelector: { matchLabels: { app: "a" } }, ingress: [allow(80), allow(81)] }),
  ];
  const plan = compile({ cluster: clusterOf(pods, [], pols), node: "n1", podCidrs: [] });
  const chain = [...plan.chains.values()].find((c) => c.dir === "ingress")!;
  assertEquals(chain.rules.length, 3, "the plan keeps every policy's rules (trace and status read them)");
  const text = fullScript(plan);
  const accepts = text.split("\n").filter((l) => / accept comment /.test(l));
  assertEquals(accepts.length, 2, accepts.join("\n"));
  assertMatch(accepts[0], /th dport 80 accept comment "x\/p1 ingress\[0\]"$/);
  assertMatch(accepts[1], /th dport 81 accept comment "x\/p2 ingress\[1\]"$/);
});
