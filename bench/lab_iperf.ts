/**
 * What the data-plane benches (IPv4 and dual stack) share: two-node labs up/down and one iperf3 TCP run
 * between namespaces, with the median and the Gbit/s format they report in.
 * @module
 */
import { flanctlCommand, inNs, mustRun, runCmd, sleep } from "../lib/lab/proc.ts";
import { loadState } from "../lib/lab/state.ts";
import type { LabState } from "../lib/lab/types.ts";

/** Seconds per iperf3 run (BENCH_SECONDS, default 4). */
export const SECONDS = Number(Deno.env.get("BENCH_SECONDS") ?? 4);

/** One iperf3 run (`seconds` long) from `client` netns to `ip` in `server` netns; bits per second received. */
export async function iperf(server: string, client: string, ip: string, seconds = SECONDS): Promise<number> {
  const srvArgv = inNs(server, ["iperf3", "-s", "-1", "-p", "5201"]);
  const srv = new Deno.Command(srvArgv[0], { args: srvArgv.slice(1), stdout: "null", stderr: "null" })
    .spawn();
  try {
    for (let i = 0; i < 50; i++) {
      const r = await runCmd(inNs(server, ["ss", "-Htln", "sport", "= :5201"]));
      if (r.stdout.includes("5201")) break;
      await sleep(50);
    }
    const out = await mustRun(inNs(client, ["iperf3", "-c", ip, "-p", "5201", "-t", String(seconds), "-J"]));
    const j = JSON.parse(out) as { end: { sum_received: { bits_per_second: number } } };
    return j.end.sum_received.bits_per_second;
  } finally {
    try {
      srv.kill("SIGKILL");
    } catch { /* exited */ }
    await srv.status;
  }
}

/** `flanctl lab up` of two nodes with one pod each, `backend`, and `extra` flags; returns its state. */
export async function labUp(name: string, backend: string, extra: string[] = []): Promise<LabState> {
  const cmd = [...flanctlCommand(), "lab", "up", "--name", name, "--nodes", "2", "--pods-per-node", "1"];
  await mustRun([...cmd, "--backend", backend, ...extra]);
  return loadState(name);
}

/** `flanctl lab down`. */
export async function labDown(name: string): Promise<void> {
  await runCmd([...flanctlCommand(), "lab", "down", "--name", name]);
}

/** The median (upper middle for an even count). */
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
/** Bits per second as Gbit/s with two decimals. */
export const gbit = (bps: number) => `${(bps / 1e9).toFixed(2)} Gbit/s`;
