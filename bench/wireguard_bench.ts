/**
 * WireGuard data-plane benchmark: iperf3 TCP throughput pod -> pod across two lab nodes with the wireguard
 * backend against the same lab with vxlan, rounds interleaved, median of each and of the per-round ratio.
 * The wireguard figure is wireguard-go's (the userspace device: this kernel has no WireGuard module), not
 * the kernel module's. Needs root, iperf3 and wireguard-go (`./install.sh --dev`).
 */
import { gbit, iperf, labDown, labUp, median, SECONDS } from "./lab_iperf.ts";

const REPEATS = Number(Deno.env.get("BENCH_REPEATS") ?? 3);
const tag = crypto.randomUUID().slice(0, 4);
const vxName = `bwv${tag}`;
const wgName = `bwg${tag}`;
const results: Record<string, number[]> = { vxlan: [], wireguard: [] };
try {
  const vx = await labUp(vxName, "vxlan");
  const wg = await labUp(wgName, "wireguard", ["--wireguard-way", "userspace"]);
  for (let i = 0; i < REPEATS; i++) {
    results.vxlan.push(await iperf(vx.pods[1].netns, vx.pods[0].netns, vx.pods[1].ip!));
    results.wireguard.push(await iperf(wg.pods[1].netns, wg.pods[0].netns, wg.pods[1].ip!));
  }
} finally {
  await labDown(vxName);
  await labDown(wgName);
}
console.log(`iperf3 TCP pod -> pod, ${SECONDS} s x ${REPEATS} runs each (median), one stream`);
for (const [k, v] of Object.entries(results)) {
  console.log(`  ${k.padEnd(10)} ${gbit(median(v)).padStart(14)}   runs: ${v.map(gbit).join(", ")}`);
}
const ratio = median(results.wireguard.map((x, i) => x / results.vxlan[i]));
console.log(
  `  wireguard / vxlan = ${ratio.toFixed(3)} (median of per-round ratios; wireguard-go, userspace)`,
);
