/**
 * UDP backend benchmark: iperf3 TCP throughput and ping RTT pod -> pod across two lab nodes, udp (the
 * userspace data path) against kernel vxlan, all labs up at once and measured interleaved (in a random
 * order each round), REPEATS rounds of SECONDS each; medians and the median of per-round ratios are
 * reported with the goals (udp >= 0.10x vxlan floor, >= 0.3x target; RTT added over vxlan
 * <= 0.3 ms). Also the restart gap: packets lost by a 100 pps cross-node ping while one udp daemon
 * restarts. Each data-path technique is its own lab (see VARIANTS: plain, + recvmmsg/sendmmsg, + TUN
 * offloads with UDP GSO, + receive coalescing, + UDP_GRO, + the receive worker sending the replies its
 * writes made the kernel queue (the default), + worker threads at nice -10 — not the default), so each
 * one's gain over the one before is measured in the same rounds. Env: BENCH_SECONDS, BENCH_REPEATS,
 * BENCH_UDP_ARGS (extra daemon flags for the udp labs), BENCH_VARIANTS (comma-separated variant names:
 * only those, with vxlan and the default).
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
/** BENCH_RTT_ONLY=1: pings only (no iperf3, no restart gap) — many rounds of the RTT comparison quickly. */
const RTT_ONLY = Deno.env.get("BENCH_RTT_ONLY") === "1";
const tag = crypto.randomUUID().slice(0, 4);

/** One iperf3 run of SECONDS (this bench's default is 3 s). */
const iperf = (server: string, client: string, ip: string) => iperfRun(server, client, ip, SECONDS);

/** Average and median RTT (ms) of 50 pings at 20 ms intervals. */
async function rtt(client: string, ip: string): Promise<[number, number]> {
  const out = await mustRun(inNs(client, ["ping", "-n", "-c", "50", "-i", "0.02", ip]));
  const m = /= [\d.]+\/([\d.]+)\//.exec(out);
  const each = [...out.matchAll(/time=([\d.]+)/g)].map((x) => Number(x[1]));
  if (!m || !each.length) throw new Error(`no rtt in: ${out}`);
  return [Number(m[1]), median(each)];
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

/** Thrown past the rounds with BENCH_RTT_ONLY=1 (no restart gap measured). */
class RttOnly extends Error {}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const gbit = (bps: number) => `${(bps / 1e9).toFixed(3)} Gbit/s`;

// The data-path variants, each its own two-node lab, measured interleaved with kernel vxlan in every round,
// each with the variant its gain is measured against (the one it adds a technique to):
// "plain": one recvfrom/sendto per packet, no offloads; "mmsg": recvmmsg/sendmmsg (32 per call);
// "send offload": + flannel0 TUN offloads (TSO super-packets cut in userspace) and UDP GSO sends;
// "coalescing": + received segments merged into GSO super-packets written to flannel0;
// "udp gro": + UDP_GRO on the socket (a UDP GSO packet read whole);
// "rx steals": + the receive worker reads flannel0 while traffic is light and takes the replies its writes
// made the kernel queue (FLANCTL_UDP_STEAL; the daemon's default: one thread wake-up less per round trip);
// "mmsg steals": "mmsg" + the same (the steal without TUN offloads);
// "warm-up": + the receive worker warmed up on loopback stand-ins before it serves (FLANCTL_UDP_WARMUP,
// lib/backend/udp/udp_warmup.ts; the daemon's default; every variant before it runs without);
// "pinned": + both workers of each daemon on CPU 0 (FLANCTL_UDP_CPU=0; not the default, see docs/performance.md);
// "pinned only": "udp gro" + CPU 0 without the steal; "nice -10": "warm-up" + the worker threads at
// nice -10 (FLANCTL_UDP_NICE=-10; not the default: no clear gain).
const NOSTEAL = { FLANCTL_UDP_STEAL: "0" };
const COLD = { FLANCTL_UDP_WARMUP: "0" };
const ALL_VARIANTS: [string, Record<string, string>, string][] = [
  ["plain", { FLANCTL_UDP_BATCH: "1", FLANCTL_UDP_OFFLOAD: "0", ...NOSTEAL, ...COLD }, ""],
  ["mmsg", { FLANCTL_UDP_OFFLOAD: "0", ...NOSTEAL, ...COLD }, "plain"],
  ["send offload", { FLANCTL_UDP_COALESCE: "0", FLANCTL_UDP_GRO: "0", ...NOSTEAL, ...COLD }, "mmsg"],
  ["coalescing", { FLANCTL_UDP_GRO: "0", ...NOSTEAL, ...COLD }, "send offload"],
  ["udp gro", { ...NOSTEAL, ...COLD }, "coalescing"],
  ["rx steals", COLD, "udp gro"],
  ["mmsg steals", { FLANCTL_UDP_OFFLOAD: "0", ...COLD }, "mmsg"],
  ["warm-up", {}, "rx steals"],
  ["pinned", { FLANCTL_UDP_CPU: "0" }, "warm-up"],
  ["pinned only", { FLANCTL_UDP_CPU: "0", ...NOSTEAL, ...COLD }, "udp gro"],
  ["nice -10", { FLANCTL_UDP_NICE: "-10" }, "warm-up"],
];
const DEFAULT = "warm-up";
// BENCH_VARIANTS="udp gro,rx steals": only these (and vxlan, and the default for the restart gap).
const only = (Deno.env.get("BENCH_VARIANTS") ?? "").split(",").map((x) => x.trim()).filter(Boolean);
const VARIANTS = ALL_VARIANTS.filter(([k]) => !only.length || only.includes(k) || k === DEFAULT);
const udpArgs = (Deno.env.get("BENCH_UDP_ARGS") ?? "").split(" ").filter(Boolean).map((a) =>
  `--daemon-arg=${a}`
);
const names = ["vxlan", ...VARIANTS.map(([k]) => k)];
const labName = (i: number) => `bq${i}${tag}`;
const bps: Record<string, number[]> = Object.fromEntries(names.map((k) => [k, []]));
const rtts: Record<string, number[]> = Object.fromEntries(names.map((k) => [k, []]));
const p50s: Record<string, number[]> = Object.fromEntries(names.map((k) => [k, []]));
let gap = "";
try {
  const labs: [string, LabState][] = [["vxlan", await labUp(labName(0), "vxlan")]];
  for (const [i, [k, env]] of VARIANTS.entries()) {
    labs.push([k, await labUp(labName(i + 1), "udp", udpArgs, env)]);
  }
  await sleep(1000);
  for (let i = 0; i < REPEATS; i++) {
    // A new order every round: no variant always runs right after the same other one.
    const order = labs.map((l) => [Math.random(), l] as const).sort((a, b) => a[0] - b[0]).map((x) => x[1]);
    for (const [k, s] of order) {
      const [p0, p1] = [s.pods[0], s.pods[1]];
      if (!RTT_ONLY) bps[k].push(await iperf(p1.netns, p0.netns, p1.ip!));
      const [avg, p50] = await rtt(p0.netns, p1.ip!);
      rtts[k].push(avg);
      p50s[k].push(p50);
    }
  }
  // Restart gap: node2's daemon (default data path) restarts under a 100 pps ping from node1's pod.
  if (RTT_ONLY) throw new RttOnly();
  const ud = labs.find(([k]) => k === DEFAULT)![1];
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
} catch (e) {
  if (!(e instanceof RttOnly)) throw e;
} finally {
  for (let i = 0; i <= VARIANTS.length; i++) {
    await runCmd([...flanctlCommand(), "lab", "down", "--name", labName(i)]);
  }
}

const perRound = (a: string, b: string, xs: Record<string, number[]>) =>
  median(xs[a].map((x, i) => x / xs[b][i]));
if (!RTT_ONLY) printThroughput();

function printThroughput() {
  console.log(`iperf3 TCP pod->pod across nodes, ${SECONDS} s x ${REPEATS} interleaved rounds, one stream`);
  console.log(
    `  ${"variant".padEnd(13)} ${"median".padStart(16)}  ${"/ vxlan".padStart(7)}  ${
      "gain".padStart(6)
    }   runs`,
  );
  for (const k of names) {
    const ratio = k === "vxlan" ? "" : perRound(k, "vxlan", bps).toFixed(3);
    const base = VARIANTS.find((v) => v[0] === k)?.[2] ?? "";
    const gain = names.includes(base) ? `x${perRound(k, base, bps).toFixed(2)}` : "";
    console.log(
      `  ${k.padEnd(13)} ${gbit(median(bps[k])).padStart(16)}  ${ratio.padStart(7)}  ${gain.padStart(6)}   ${
        bps[k].map(gbit).join(", ")
      }`,
    );
  }
  console.log(
    "  (gain: median of per-round ratios to the variant it adds to (see bench/udp_bench.ts VARIANTS); " +
      "/ vxlan: median of per-round ratios)",
  );
  const ratio = perRound(DEFAULT, "vxlan", bps);
  console.log(
    `  udp (${DEFAULT}, the default) / vxlan = ${ratio.toFixed(3)}  (floor 0.10: ${
      ratio >= 0.1 ? "met" : "NOT met"
    }; target 0.30: ${ratio >= 0.3 ? "met" : "NOT met"})`,
  );
}
console.log(
  "ping RTT, 50 at 20 ms per round: avg and median (p50) of the 50, median of rounds; (+added) = median " +
    "of per-round udp - vxlan:",
);
for (const k of names) {
  const add = (xs: Record<string, number[]>) =>
    k === "vxlan" ? "" : ` (+${median(xs[k].map((x, i) => x - xs.vxlan[i])).toFixed(3)})`;
  const base = VARIANTS.find((v) => v[0] === k)?.[2] ?? "";
  const d = names.includes(base) ? median(p50s[k].map((x, i) => x - p50s[base][i])) : NaN;
  const vs = Number.isNaN(d) ? "" : `   p50 vs ${base}: ${d >= 0 ? "+" : ""}${d.toFixed(3)} ms`;
  console.log(
    `  ${k.padEnd(13)} avg ${median(rtts[k]).toFixed(3)} ms${add(rtts).padEnd(9)}  p50 ${
      median(p50s[k]).toFixed(3)
    } ms${add(p50s).padEnd(9)}${vs}`,
  );
}
const added = median(rtts[DEFAULT].map((x, i) => x - rtts.vxlan[i]));
const added50 = median(p50s[DEFAULT].map((x, i) => x - p50s.vxlan[i]));
console.log(
  `  RTT added over vxlan (${DEFAULT}) = ${added.toFixed(3)} ms avg, ${
    added50.toFixed(3)
  } ms p50  (goal <= 0.3 ms: ${added <= 0.3 ? "met" : "NOT met"} by avg, ${
    added50 <= 0.3 ? "met" : "NOT met"
  } by p50)`,
);
if (!RTT_ONLY) console.log(`restart gap (udp daemon on node2 restarted, 100 pps ping): ${gap}`);
