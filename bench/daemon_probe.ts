/**
 * What the daemon benches read of a running daemon: its memory and CPU from /proc, and how many peer routes
 * it has programmed on flannel.1. Helper of bench/daemon_bench.ts, bench/daemon_flanneld_bench.ts and
 * bench/kube_apiserver_bench.ts (not a bench itself).
 * @module
 */
import { nsRun } from "../tests/netns.ts";

/** Clock ticks per second (USER_HZ) of /proc/PID/stat's times. */
const TICK = 100;

/** RSS and its peak (VmRSS, VmHWM) of `pid`, MiB; NaN when the field is missing. */
export function procMemory(pid: number): { rss: number; hwm: number } {
  const st = Deno.readTextFileSync(`/proc/${pid}/status`);
  const mib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(st)?.[1] ?? NaN) / 1024;
  return { rss: mib("VmRSS"), hwm: mib("VmHWM") };
}

/** CPU time (utime + stime) `pid` has used, seconds. */
export function cpuSeconds(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / TICK;
}

/** Peer routes programmed in `ns` (the onlink routes on flannel.1). */
export async function countRoutes(ns: string): Promise<number> {
  const r = await nsRun(ns, ["ip", "route", "show", "dev", "flannel.1"]);
  return r.stdout.split("\n").filter((l) => l.includes("onlink")).length;
}
