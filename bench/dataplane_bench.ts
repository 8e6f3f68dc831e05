/**
 * Data-plane benchmark: iperf3 TCP throughput pod -> pod across two lab nodes with the vxlan and host-gw
 * backends, and over a bare veth pair between two namespaces (the underlay reference), all in one run.
 * vxlan is measured as the daemon runs by default (TX checksum offload of flannel.1 kept: no NAT in the lab)
 * and with `--vxlan-tx-checksum-offload=false` ("vxlan-csum-off", what it does behind NAT), since that
 * setting alone costs TSO and about half of VXLAN throughput.
 * Each path is measured REPEATS times, interleaved, and the median is reported, with the ratios the issue
 * sets goals for (median of the per-round ratios): vxlan >= 0.9x host-gw, host-gw >= 0.95x underlay. Node -> node over the lab's underlay
 * bridge is printed too, to show what the bridge hop itself costs.
 * Needs root and iperf3 (`./install.sh --dev`).
 */
import { mustRun, runCmd } from "../lib/lab/proc.ts";
import { gbit, iperf, labDown, labUp, median, SECONDS } from "./lab_iperf.ts";
import type { LabState } from "../lib/lab/types.ts";

const REPEATS = Number(Deno.env.get("BENCH_REPEATS") ?? 3);
const tag = crypto.randomUUID().slice(0, 4);

const vxName = `bvx${tag}`;
const vcName = `bvc${tag}`;
const hgName = `bhg${tag}`;
const a = `bu${tag}a`;
const b = `bu${tag}b`;
const results: Record<string, number[]> = {
  underlay: [],
  "node->node": [],
  "host-gw": [],
  vxlan: [],
  "vxlan-csum-off": [],
};
try {
  // Bare veth underlay: two namespaces connected directly.
  await mustRun(["ip", "netns", "add", a]);
  await mustRun(["ip", "netns", "add", b]);
  for (const n of [a, b]) await mustRun(["ip", "-n", n, "link", "set", "lo", "up"]);
  await mustRun(["ip", "-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b]);
  await mustRun(["ip", "-n", a, "addr", "add", "10.199.0.1/24", "dev", "eth0"]);
  await mustRun(["ip", "-n", b, "addr", "add", "10.199.0.2/24", "dev", "eth0"]);
  for (const n of [a, b]) await mustRun(["ip", "-n", n, "link", "set", "eth0", "up"]);

  const vx = await labUp(vxName, "vxlan");
  const hg = await labUp(hgName, "host-gw");
  // Behind NAT the daemon switches TX checksum offload off on flannel.1 (flannel #1279); this lab forces it.
  const vc = await labUp(vcName, "vxlan", ["--daemon-arg=--vxlan-tx-checksum-offload=false"]);
  const pods = (s: LabState) => [s.pods[0], s.pods[1]];
  for (let i = 0; i < REPEATS; i++) {
    results.underlay.push(await iperf(b, a, "10.199.0.2"));
    results["node->node"].push(await iperf(hg.nodes[1].netns, hg.nodes[0].netns, hg.nodes[1].publicIP));
    const [h0, h1] = pods(hg);
    results["host-gw"].push(await iperf(h1.netns, h0.netns, h1.ip!));
    const [v0, v1] = pods(vx);
    results.vxlan.push(await iperf(v1.netns, v0.netns, v1.ip!));
    const [c0, c1] = pods(vc);
    results["vxlan-csum-off"].push(await iperf(c1.netns, c0.netns, c1.ip!));
  }
} finally {
  await labDown(vxName);
  await labDown(vcName);
  await labDown(hgName);
  await runCmd(["ip", "netns", "del", a]);
  await runCmd(["ip", "netns", "del", b]);
}

const m = Object.fromEntries(Object.entries(results).map(([k, v]) => [k, median(v)]));
console.log(`iperf3 TCP, ${SECONDS} s x ${REPEATS} runs each (median), one stream`);
for (const [k, v] of Object.entries(results)) {
  console.log(`  ${k.padEnd(12)} ${gbit(m[k]).padStart(14)}   runs: ${v.map(gbit).join(", ")}`);
}
// Ratios per round (the paths of one round ran back to back, so slow changes in background load cancel
// out), then their median.
const ratio = (a: string, b: string) => median(results[a].map((x, i) => x / results[b][i]));
const r1 = ratio("vxlan", "host-gw");
const r2 = ratio("host-gw", "underlay");
console.log("ratios (median of per-round ratios):");
console.log(`  vxlan / host-gw      = ${r1.toFixed(3)}  (goal >= 0.90: ${r1 >= 0.9 ? "met" : "NOT met"})`);
const r3 = ratio("vxlan-csum-off", "host-gw");
console.log(
  `  vxlan-csum-off / host-gw = ${r3.toFixed(3)}  (daemon run with --vxlan-tx-checksum-offload=false)`,
);
console.log(`  host-gw / underlay   = ${r2.toFixed(3)}  (goal >= 0.95: ${r2 >= 0.95 ? "met" : "NOT met"})`);
console.log(
  `  host-gw / node->node = ${ratio("host-gw", "node->node").toFixed(3)}  (cost of the pod hops alone)`,
);
console.log(
  `  node->node / underlay = ${
    ratio("node->node", "underlay").toFixed(3)
  }  (cost of the lab's underlay bridge)`,
);
