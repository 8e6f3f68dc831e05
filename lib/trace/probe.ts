/**
 * `--probe`: one ping from the source to the destination (only a destination on the path inside the pod
 * network, never anything outside the nodes), and where it was last seen: the last device on the path
 * whose packet counter in the packet's direction moved while the ping was in flight.
 * @module
 */
import { runCmd } from "../lab/proc.ts";
import type { PathDevice } from "./types.ts";

/** argv prefix that runs a command in namespace `netns` (a name, or "pid:N" for an unnamed pod netns). */
function inNs(netns: string | null): string[] {
  if (netns === null) return [];
  const pid = /^pid:(\d+)$/.exec(netns);
  return pid ? ["nsenter", "-t", pid[1], "-n"] : ["ip", "netns", "exec", netns];
}

async function counters(devs: PathDevice[]): Promise<(number | null)[]> {
  return await Promise.all(devs.map(async (d) => {
    const argv = [...inNs(d.netns), "ip", "-s", "-j", "link", "show", "dev", d.dev];
    const r = await runCmd(argv);
    if (r.code !== 0) return null;
    const j = JSON.parse(r.stdout) as { stats64?: { rx: { packets: number }; tx: { packets: number } } }[];
    return j[0]?.stats64?.[d.dir].packets ?? null;
  }));
}

/**
 * Sends one ping from `srcNetns` (null: this namespace) to `dst` and returns a sentence naming the last
 * device that saw it (and whether the reply came back).
 */
export async function probePath(srcNetns: string | null, dst: string, devs: PathDevice[]): Promise<string> {
  if (!devs.length) return "not sent: no device on the path";
  const before = await counters(devs);
  const argv = [...inNs(srcNetns), "ping", "-c", "1", "-W", "1", dst];
  let ping;
  try {
    ping = await runCmd(argv);
  } catch {
    return "not sent: ping is not installed (apt-get install iputils-ping)";
  }
  if (/No such file|not found/.test(ping.stderr) && ping.code !== 0 && ping.code !== 1) {
    return "not sent: ping is not installed (apt-get install iputils-ping)";
  }
  const after = await counters(devs);
  let last = -1;
  devs.forEach((_, i) => {
    if (before[i] !== null && after[i] !== null && after[i]! > before[i]!) last = i;
  });
  const answered = ping.code === 0;
  const at = (d: PathDevice) => `${d.dev}${d.netns ? ` in ${d.netns}` : ""}`;
  const where = last < 0
    ? `never seen, not even on ${at(devs[0])}`
    : `last seen ${devs[last].dir} on ${at(devs[last])}`;
  return `${answered ? "reply received" : "no reply"}; ${where}`;
}
