/**
 * NetworkPolicy benchmark, in a netns of its own (it re-executes itself there): a synthetic cluster of
 * `--pods` pods (default 5,000) over 50 nodes and 100 namespaces, `--policies` policies (default 1,000:
 * each selects one app of its namespace; nine ingress rules, each from the `tier=fe` pods of one team's
 * namespaces on ten ports, one by name; one egress rule to the first on one UDP port), this node holding 1/50
 * of the pods, each selected by ten policies (10,200 rules). Measures,
 * through lib/netpol's engine and libnftables:
 *
 * 1. Full programming at start: compile + the whole table in one transaction (goal ≤ 1 s for 10,000 rules).
 *    With its CPU time (this process: compile, libnftables and the kernel's commit on its behalf) and that
 *    of libnftables alone, since on a shared machine the wall time follows the load average (printed).
 * 2. One pod's label change, API model to kernel (compile + diff + one transaction), median of `--rounds`
 *    (goal ≤ 100 ms), and one policy's change.
 * 3. The process's RSS with that model held (goal ≤ 64 MiB for the whole daemon).
 *
 * TCP connection rate and iperf3 between selected pods: bench/netpol_dataplane_bench.ts. kube-router's
 * change-to-enforcement latency is not in this run (docs/networkpolicy.md cites a hand measurement).
 *
 *   deno task bench netpol      (or: deno run -A bench/netpol_bench.ts [--pods N] [--policies N] [--rounds N])
 * @module
 */
import { arg, runInOwnNetns } from "./own_netns.ts";
import { nftDriver } from "../lib/firewall/nft.ts";
import { NetpolEngine } from "../lib/netpol/engine.ts";
import { fullScript } from "../lib/netpol/render.ts";
import { keyOf, parseNamespace, parsePod, parsePolicy } from "../lib/netpol/model.ts";
import { IPNet } from "../lib/base/cidr.ts";
import { nsJson, podJson, policyJson } from "../tests/netpol_fixture.ts";

await runInOwnNetns("FLANCTL_NETPOL_BENCH_NODE", "fbnp", import.meta.url);

const PODS = arg("--pods", 5000);
const POLICIES = arg("--policies", 1000);
const ROUNDS = arg("--rounds", 21);
const NODES = 50, NAMESPACES = 100;

function podIp(i: number): string {
  const node = i % NODES, k = Math.floor(i / NODES);
  return `10.${100 + Math.floor(node / 4)}.${(node % 4) * 64 + Math.floor(k / 250)}.${(k % 250) + 2}`;
}

function pod(i: number, tier: string) {
  const k = Math.floor(i / NODES); // the node's k-th pod: namespaces and apps spread over every node
  return podJson(`ns${k % NAMESPACES}`, `p${i}`, {
    labels: { app: `a${Math.floor(k / 2) % 50}`, tier },
    ips: [podIp(i)],
    node: `n${i % NODES}`,
    ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }],
  });
}

function policy(i: number, port: number) {
  const from = (j: number) => [{
    namespaceSelector: { matchLabels: { team: `t${(i + j) % 10}` } },
    podSelector: { matchLabels: { tier: "fe" } },
  }];
  const ports = [...Array.from({ length: 8 }, (_, j) => ({ port: port + j })), { port: 443 }, {
    port: "http",
  }];
  return policyJson(`ns${i % NAMESPACES}`, `pol${i}`, {
    podSelector: { matchLabels: { app: `a${Math.floor((i % NAMESPACES) / 2) % 50}` } },
    policyTypes: ["Ingress", "Egress"],
    ingress: Array.from({ length: 9 }, (_, j) => ({ from: from(j), ports })),
    egress: [{ to: from(0), ports: [{ protocol: "UDP", port }] }],
  });
}

/**
 * Policy `i`'s first port: the ten policies that select one pod (i, i + 100, …) allow different ports, so
 * each of the 10,200 rules matches something of its own (rules that repeat an earlier one are written
 * once: with one port for all, this node's chains would hold 1,200 rules).
 */
const portOf = (i: number) => 1000 + 10 * Math.floor(i / NAMESPACES);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * This process's CPU time (user + system) in ms, from /proc/self/stat (10 ms ticks). libnftables runs in
 * the process and the kernel's netlink commit runs on its behalf, so both count: on this shared 2-core
 * machine the wall time follows the load average, the CPU time much less.
 */
function cpuMs(): number {
  const f = Deno.readTextFileSync("/proc/self/stat").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

const nft = nftDriver();
if (nft.via !== "libnftables") console.log("note: libnftables missing: the nft binary per change");
const engine = new NetpolEngine({ nft, node: "n0", podCidrs: [IPNet.parse("10.100.0.0/18")] });
for (let i = 0; i < NAMESPACES; i++) {
  const n = parseNamespace(nsJson(`ns${i}`, { team: `t${i % 10}` }));
  engine.setNamespace(n.name, n);
}
for (let i = 0; i < PODS; i++) {
  const p = parsePod(pod(i, Math.floor(i / NODES) % 3 ? "be" : "fe"));
  engine.setPod(keyOf(p), p);
}
for (let i = 0; i < POLICIES; i++) {
  const p = parsePolicy(policy(i, portOf(i)));
  engine.setPolicy(keyOf(p), p);
}

const load0 = Deno.loadavg()[0];
let c = cpuMs();
let t = performance.now();
await engine.sync();
const full = performance.now() - t;
const fullCpu = cpuMs() - c;
// The same whole-table text through libnftables again: the kernel side of the figure above.
const text = fullScript(engine.applied!);
c = cpuMs();
t = performance.now();
await nft.run(text);
const nftOnly = performance.now() - t;
const nftCpu = cpuMs() - c;
const plan = engine.applied!;
const rules = [...plan.chains.values()].reduce((a, c) => a + c.rules.length + 1, 0);
const written = text.split("\n").filter((l) => l.startsWith("\t\t") && / comment "/.test(l)).length;
const elements = [...plan.sets.values()].reduce((a, s) => a + s.elements.length, 0);

// A peer pod of another node flips tier be <-> fe: it joins or leaves the peer sets of the local chains.
const label: number[] = [], cpu: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const i = NODES * 3 * (r + 1) + 1; // a tier=fe pod of node n1
  const p = parsePod(pod(i, r % 2 ? "fe" : "be"));
  t = performance.now();
  engine.setPod(keyOf(p), p);
  await engine.sync();
  label.push(performance.now() - t);
  cpu.push(engine.stats.lastCompileMs);
}
// One policy's ports change (its chains on this node are rewritten).
const pol: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const p = parsePolicy(policy(0, r % 2 ? 8081 : portOf(0)));
  t = performance.now();
  engine.setPolicy(keyOf(p), p);
  await engine.sync();
  pol.push(performance.now() - t);
}
// A repair of the whole table after `nft flush ruleset`.
await nft.run("flush ruleset\n");
c = cpuMs();
t = performance.now();
await engine.ensure();
const repair = performance.now() - t;
const repairCpu = cpuMs() - c;
const rss = Deno.memoryUsage().rss / 2 ** 20;

console.log(
  `load average ${load0.toFixed(1)} at start, ${Deno.loadavg()[0].toFixed(1)} at end (2 cores here)`,
);
const row = (what: string, v: string, goal: string) =>
  console.log(`${what.padEnd(52)} ${v.padStart(12)}   ${goal}`);
console.log(
  `${PODS} pods, ${POLICIES} policies, ${NAMESPACES} namespaces, ${NODES} nodes; this node: ${plan.chains.size} ` +
    `pod chains, ${rules} rules (${written} in the kernel), ${plan.sets.size} sets with ${elements} elements`,
);
row(
  "full programming (compile + one transaction)",
  `${full.toFixed(0)} ms`,
  "goal <= 1000 ms for 10,000 rules",
);
row("  its CPU time (this process: compile + libnftables)", `${fullCpu} ms`, "");
row("  of which libnftables (the same text again)", `${nftOnly.toFixed(0)} ms`, "");
row("    its CPU time", `${nftCpu} ms`, "");
row(`label change to kernel, median of ${ROUNDS}`, `${median(label).toFixed(1)} ms`, "goal <= 100 ms");
row(`  of which compile + diff (no kernel), median`, `${median(cpu).toFixed(1)} ms`, "");
row(`policy change to kernel, median of ${ROUNDS}`, `${median(pol).toFixed(1)} ms`, "goal <= 100 ms");
row("repair after nft flush ruleset (list + whole table)", `${repair.toFixed(0)} ms`, "");
row("  its CPU time", `${repairCpu} ms`, "");
row("RSS of this process with the model", `${rss.toFixed(0)} MiB`, "goal <= 64 MiB (whole daemon)");
