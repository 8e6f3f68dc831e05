/**
 * The cross-node ping check `lab up` ends with: every pod pings one pod on every other node.
 * @module
 */
import { inNs, runCmd } from "./proc.ts";
import type { LabState, PodState } from "./types.ts";

/** One ping of the check. */
export interface PingResult {
  from: string;
  to: string;
  ip: string;
  ok: boolean;
  /** True when `ping` itself is not installed. */
  missing?: boolean;
}

/**
 * Seconds a pair may take to answer: daemons learn each other's leases from store events after they are
 * ready, so on a loaded machine a peer can be programmed a few seconds after `/readyz` says 200.
 */
const CONVERGE_S = 20;

/**
 * True when `from` gets at least one reply from `ip` (3 tries, 1 s each), asked again while it gets none
 * (ping's exit 1) for up to `convergeS` seconds (0: once); any other failure (exit 2, no ping) is final.
 */
export async function ping(fromNetns: string, ip: string, count = 3, convergeS = 0): Promise<boolean> {
  const until = Date.now() + convergeS * 1000;
  for (;;) {
    const r = await runCmd(
      inNs(fromNetns, ["ping", "-n", "-q", "-c", String(count), "-i", "0.2", "-W", "1", ip]),
    );
    if (r.code === 0) return true;
    if (r.code !== 1 || Date.now() >= until) return false;
  }
}

/** Every pod pings the first pod of every other node, in parallel, over each family the pods have. */
export async function crossNodePing(s: LabState): Promise<PingResult[]> {
  const firstPod = new Map<string, PodState>();
  for (const p of s.pods) if (!firstPod.has(p.node) && (p.ip || p.ipv6)) firstPod.set(p.node, p);
  const jobs: Promise<PingResult>[] = [];
  for (const p of s.pods) {
    for (const [node, target] of firstPod) {
      if (node === p.node) continue;
      for (const ip of [target.ip, target.ipv6]) {
        if (!ip) continue;
        jobs.push(ping(p.netns, ip, 3, CONVERGE_S).then((ok) => ({ from: p.name, to: target.name, ip, ok })));
      }
    }
  }
  return await Promise.all(jobs);
}
