/**
 * UDP backend benchmark: iperf3 TCP throughput and ping RTT pod -> pod across two lab nodes, udp (the
 * userspace data path) against kernel vxlan, both labs up at once and measured interleaved, REPEATS rounds
 * of SECONDS each; medians and the median of per-round ratios are reported with the goals
 * (udp >= 0.10x vxlan floor, >= 0.3x target; RTT added over vxlan <= 0.3 ms). Also the restart gap: packets
 * lost by a 100 pps cross-node ping while one udp daemon restarts. Env: BENCH_SECONDS, BENCH_REPEATS,
 * BENCH_UDP_ARGS (extra daemon flags for the udp lab, to compare data-path variants).
 * Needs root and iperf3 (`./install.sh --dev`).
 */
import { flanctlCommand, inNs, mustRun, runCmd, sleep } from "../lib/lab/proc.ts";
import { loadState } from "../lib/lab/state.ts";
import type { LabState } from "../lib/lab/types.ts";
import { startDaemon, stopDaemon, waitDaemonReady } from "../lib/lab/services.ts";
import { startPing } from "../tests/lab_verify.ts";
import { iperf as iperfRun } from "./lab_iperf.ts";

const SECONDS = Number(Deno.env.get("BENCH_SECONDS") ?? 3);
const REPEATS = Number(Deno.env.get("BENCH_REPEATS") ?? 5);
const tag = crypto.randomUUID().slice(0, 4);

/** One iperf3 run of SECONDS (this bench's default is 3 s). */
const iperf = (server: string, client: string, ip: string) => iperfRun(server, client, ip, SECONDS);

/** Average RTT (ms) of 50 pings at 20 ms intervals. */
async function rtt(client: string, ip: string): Promise<number> {
  const out = await mustRun(inNs(client, ["ping", "-n", "-q", "-c", "50", "-i", "0.02", ip]));
  const m = /= [\d.]+\/([\d.]+)\//.exec(out);
  if (!m) throw new Error(`no rtt in: ${out}`);
  return Number(m[1]);
}

async function labUp(
  name: string,
  backend: string,
  extra: string[] = [],
  env?: Record<string, string>,
): Promise<LabState> {
  const cmd = [...flanctlCommand(), "lab", "up", "--name", name, "--nodes", "2", "--pods-per-node", "1"];
  await mustRun([...cmd, "--backend", backend, ...extra], { env });
  return loadState(name);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const gbit = (bps: number) => `${(bps / 1e9).toFixed(3)} Gbit/s`;

const vxName = `bqv${tag}`, udName = `bqu${tag}`, u1Name = `bq1${tag}`;
const udpArgs = (Deno.env.get("BENCH_UDP_ARGS") ?? "").split(" ").filter(Boolean).map((a) =>
  `--daemon-arg=${a}`
);
// "udp": the daemon's default data path (recvmmsg/sendmmsg, 32 per call); "udp-1": one syscall per packet.
const bps: Record<string, number[]> = { vxlan: [], udp: [], "udp-1": [] };
const rtts: Record<string, number[]> = { vxlan: [], udp: [], "udp-1": [] };
let gap = "";
try {
  const vx = await labUp(vxName, "vxlan");
  const ud = await labUp(udName, "udp", udpArgs);
  const u1 = await labUp(u1Name, "udp", udpArgs, { FLANCTL_UDP_BATCH: "1" });
  await sleep(1000);
  for (let i = 0; i < REPEATS; i++) {
    for (const [k, s] of [["vxlan", vx], ["udp", ud], ["udp-1", u1]] as const) {
      const [p0, p1] = [s.pods[0], s.pods[1]];
      bps[k].push(await iperf(p1.netns, p0.netns, p1.ip!));
      rtts[k].push(await rtt(p0.netns, p1.ip!));
    }
  }
  // Restart gap: node2's daemon restarts under a 100 pps ping from node1's pod to node2's pod.
  const src = ud.pods[0].netns, dst = ud.pods[1].ip!;
  const p = startPing(src, dst, 0.01);
  await sleep(500);
  await stopDaemon(ud, ud.nodes[1]);
  await startDaemon(ud, ud.nodes[1]);
  await waitDaemonReady(ud, ud.nodes[1]);
  await sleep(1000);
  const r = await p.stop();
  gap = `${r.transmitted - r.received} of ${r.transmitted} packets lost (~${
    (r.transmitted - r.received) * 10
  } ms)`;
} finally {
  await runCmd([...flanctlCommand(), "lab", "down", "--name", vxName]);
  await runCmd([...flanctlCommand(), "lab", "down", "--name", udName]);
  await runCmd([...flanctlCommand(), "lab", "down", "--name", u1Name]);
}

console.log(`iperf3 TCP pod->pod across nodes, ${SECONDS} s x ${REPEATS} interleaved rounds, one stream`);
for (const k of ["vxlan", "udp", "udp-1"]) {
  console.log(`  ${k.padEnd(6)} ${gbit(median(bps[k])).padStart(16)}   runs: ${bps[k].map(gbit).join(", ")}`);
}
const ratio = median(bps.udp.map((x, i) => x / bps.vxlan[i]));
console.log(
  `  udp / vxlan = ${ratio.toFixed(3)}  (floor 0.10: ${ratio >= 0.1 ? "met" : "NOT met"}; target 0.30: ${
    ratio >= 0.3 ? "met" : "NOT met"
  })`,
);
const r1 = median(bps["udp-1"].map((x, i) => x / bps.vxlan[i]));
const gain = median(bps.udp.map((x, i) => x / bps["udp-1"][i]));
console.log(`  udp-1 / vxlan = ${r1.toFixed(3)}; recvmmsg/sendmmsg gain (udp / udp-1) = ${gain.toFixed(3)}`);
console.log(
  `ping RTT (avg of 50, median of rounds): vxlan ${median(rtts.vxlan).toFixed(3)} ms, udp ${
    median(rtts.udp).toFixed(3)
  } ms, udp-1 ${median(rtts["udp-1"]).toFixed(3)} ms`,
);
const added = median(rtts.udp.map((x, i) => x - rtts.vxlan[i]));
console.log(
  `  RTT added over vxlan = ${added.toFixed(3)} ms  (goal <= 0.3 ms: ${added <= 0.3 ? "met" : "NOT met"})`,
);
console.log(`restart gap (udp daemon on node2 restarted, 100 pps ping): ${gap}`);
