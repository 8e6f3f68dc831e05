/**
 * IPv6 data-plane benchmark: iperf3 TCP throughput pod -> pod across two lab nodes over IPv6 with the vxlan
 * backend (flannel-v6.1 over the IPv6 underlay) and with host-gw (routes via PublicIPv6), and over IPv4
 * vxlan and host-gw from the same dual-stack labs, all in one run, interleaved, REPEATS times (median). The
 * issue's goal: the IPv6 overlay costs no more than the IPv4 one relative to its own host-gw, i.e.
 * (vxlan-v6 / host-gw-v6) >= (vxlan-v4 / host-gw-v4); both ratios are printed. Needs root and iperf3.
 */
import { gbit, iperf, labDown, labUp as labUpFamily, median, SECONDS } from "./lab_iperf.ts";

const labUp = (name: string, backend: string) => labUpFamily(name, backend, ["--ip-family", "dual"]);

const REPEATS = Number(Deno.env.get("BENCH_REPEATS") ?? 3);
const tag = crypto.randomUUID().slice(0, 4);

const vxName = `b6v${tag}`, hgName = `b6h${tag}`;
const results: Record<string, number[]> = {
  "host-gw-v4": [],
  "vxlan-v4": [],
  "host-gw-v6": [],
  "vxlan-v6": [],
};
try {
  const vx = await labUp(vxName, "vxlan");
  const hg = await labUp(hgName, "host-gw");
  for (let i = 0; i < REPEATS; i++) {
    const [h0, h1] = hg.pods, [v0, v1] = vx.pods;
    results["host-gw-v4"].push(await iperf(h1.netns, h0.netns, h1.ip!));
    results["vxlan-v4"].push(await iperf(v1.netns, v0.netns, v1.ip!));
    results["host-gw-v6"].push(await iperf(h1.netns, h0.netns, h1.ipv6!));
    results["vxlan-v6"].push(await iperf(v1.netns, v0.netns, v1.ipv6!));
  }
} finally {
  await labDown(vxName);
  await labDown(hgName);
}

console.log(
  `iperf3 TCP pod -> pod, dual-stack labs, ${SECONDS} s x ${REPEATS} runs each (median), one stream`,
);
for (const [k, v] of Object.entries(results)) {
  console.log(`  ${k.padEnd(11)} ${gbit(median(v)).padStart(14)}   runs: ${v.map(gbit).join(", ")}`);
}
const ratio = (a: string, b: string) => median(results[a].map((x, i) => x / results[b][i]));
const r4 = ratio("vxlan-v4", "host-gw-v4"), r6 = ratio("vxlan-v6", "host-gw-v6");
console.log("ratios (median of per-round ratios):");
console.log(`  vxlan-v4 / host-gw-v4 = ${r4.toFixed(3)}  (reference, same run)`);
console.log(
  `  vxlan-v6 / host-gw-v6 = ${r6.toFixed(3)}  (goal >= the v4 ratio: ${r6 >= r4 ? "met" : "NOT met"})`,
);
console.log(`  vxlan-v6 / vxlan-v4   = ${ratio("vxlan-v6", "vxlan-v4").toFixed(3)}`);
console.log(`  host-gw-v6 / host-gw-v4 = ${ratio("host-gw-v6", "host-gw-v4").toFixed(3)}`);
