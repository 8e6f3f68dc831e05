/**
 * Checks of a running lab, for the end-to-end lab tests (test-only, so not in lib/): the flannel entries each node
 * should have for its peers (derived from the peers themselves: their subnet.env, their VTEP device's
 * MAC, their public IP), compared with what the kernel holds (`ip -j` / `bridge -j`), plus a continuous
 * ping that counts losses.
 * @module
 */
import { assert, assertEquals } from "./assert.ts";
import { IPNet } from "../lib/base/cidr.ts";
import { nodeSubnet } from "../lib/lab/status.ts";
import { listNetns } from "../lib/lab/down.ts";
import { inNs, mustRun, runCmd, sleep } from "../lib/lab/proc.ts";
import type { LabState, NodeState } from "../lib/lab/types.ts";
import { ping } from "../lib/lab/check.ts";
import { startDaemon, stopDaemon, waitDaemonReady } from "../lib/lab/services.ts";

/** What a node must hold for one peer. */
export interface PeerEntry {
  peer: string;
  /** Peer subnet, e.g. "10.244.2.0/24". */
  subnet: string;
  /** Peer public IP. */
  publicIP: string;
  /** Peer VTEP MAC (vxlan). */
  vtepMac?: string;
}

async function ipJson<T>(netns: string, args: string[], tool = "ip"): Promise<T[]> {
  const out = await mustRun([tool, "-n", netns, "-j", ...args]);
  return out.trim() ? JSON.parse(out) as T[] : [];
}

/** MAC of `dev` in the node's namespace, or null when it does not exist. */
export async function linkMac(netns: string, dev: string): Promise<string | null> {
  const r = await runCmd(["ip", "-n", netns, "-j", "link", "show", "dev", dev]);
  if (r.code !== 0) return null;
  return (JSON.parse(r.stdout) as { address?: string }[])[0]?.address ?? null;
}

/** The entries every node should hold for `peers` (default: all other nodes of the lab). */
export async function expectedEntries(s: LabState, peers: NodeState[]): Promise<PeerEntry[]> {
  const out: PeerEntry[] = [];
  for (const p of peers) {
    const subnet = nodeSubnet(p);
    if (!subnet) throw new Error(`${p.name} has no subnet.env`);
    const e: PeerEntry = { peer: p.name, subnet, publicIP: p.publicIP };
    if (s.backend === "vxlan") e.vtepMac = (await linkMac(p.netns, "flannel.1")) ?? undefined;
    out.push(e);
  }
  return out;
}

/** The node's flannel entries as sorted lines ("route …", "neigh …", "fdb …") read from the kernel. */
export async function actualEntries(s: LabState, n: NodeState): Promise<string[]> {
  const lines: string[] = [];
  if (s.backend === "vxlan") {
    const routes = await ipJson<{ dst: string; gateway?: string; dev?: string; flags?: string[] }>(
      n.netns,
      ["-4", "route", "show", "dev", "flannel.1"],
    ).catch(() => []);
    for (const r of routes) {
      if (!r.gateway) continue; // the device's own connected route, if any
      lines.push(
        `route ${r.dst} via ${r.gateway} dev flannel.1${r.flags?.includes("onlink") ? " onlink" : ""}`,
      );
    }
    const neigh = await ipJson<{ dst: string; lladdr?: string; state?: string[] }>(
      n.netns,
      ["-4", "neigh", "show", "dev", "flannel.1"],
    ).catch(() => []);
    for (const x of neigh) lines.push(`neigh ${x.dst} lladdr ${x.lladdr} ${(x.state ?? []).join(",")}`);
    const fdb = await ipJson<{ mac: string; dst?: string; state?: string[] }>(
      n.netns,
      ["fdb", "show", "dev", "flannel.1"],
      "bridge",
    ).catch(() => []);
    for (const x of fdb) if (x.dst) lines.push(`fdb ${x.mac} dst ${x.dst}`);
  } else if (s.backend === "udp") {
    const routes = await ipJson<{ dst: string; gateway?: string; flags?: string[] }>(
      n.netns,
      ["-4", "route", "show", "dev", "flannel0"],
    ).catch(() => []);
    for (const r of routes) {
      if (r.gateway) lines.push(`route ${r.dst} via ${r.gateway} dev flannel0 onlink`);
    }
  } else {
    const net = IPNet.parse(s.network, "lab network");
    const routes = await ipJson<{ dst: string; gateway?: string; dev?: string }>(n.netns, [
      "-4",
      "route",
      "show",
    ]);
    for (const r of routes) {
      if (r.gateway && r.dst !== "default" && inNetwork(r.dst, net)) {
        lines.push(`route ${r.dst} via ${r.gateway} dev ${r.dev}`);
      }
    }
  }
  return lines.sort();
}

/** The lines {@link actualEntries} must return for `peers`. */
export function expectedLines(s: LabState, peers: PeerEntry[]): string[] {
  const lines: string[] = [];
  for (const p of peers) {
    const addr = p.subnet.split("/")[0];
    if (s.backend === "vxlan") {
      lines.push(`route ${p.subnet} via ${addr} dev flannel.1 onlink`);
      lines.push(`neigh ${addr} lladdr ${p.vtepMac} PERMANENT`);
      lines.push(`fdb ${p.vtepMac} dst ${p.publicIP}`);
    } else if (s.backend === "udp") {
      lines.push(`route ${p.subnet} via ${addr} dev flannel0 onlink`);
    } else {
      lines.push(`route ${p.subnet} via ${p.publicIP} dev eth0`);
    }
  }
  return lines.sort();
}

/** True when route destination `dst` (a prefix, or a bare address = /32) lies within `network`. */
function inNetwork(dst: string, network: IPNet): boolean {
  const x = IPNet.tryParse(dst.includes("/") ? dst : `${dst}/32`);
  return x !== null && network.contains(x);
}

/** Polls `fn` until it returns true; throws `what` with the last detail after `timeoutMs`. */
export async function waitUntil(
  what: string,
  fn: () => Promise<boolean | string>,
  timeoutMs = 30_000,
  intervalMs = 200,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  let last: boolean | string = false;
  while (Date.now() < end) {
    last = await fn();
    if (last === true) return;
    await sleep(intervalMs);
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${typeof last === "string" ? `: ${last}` : ""}`,
  );
}

/** Waits until node `n` holds exactly the entries for `peers`; returns the diff text on timeout. */
export async function waitEntries(s: LabState, n: NodeState, peers: NodeState[], timeoutMs = 30_000) {
  const want = expectedLines(s, await expectedEntries(s, peers));
  await waitUntil(`${n.name}'s flannel entries`, async () => {
    const got = await actualEntries(s, n);
    if (JSON.stringify(got) === JSON.stringify(want)) return true;
    return `want ${JSON.stringify(want)} got ${JSON.stringify(got)}`;
  }, timeoutMs);
}

/** A running ping; `stop()` ends it (SIGINT) and returns what it counted. */
export interface RunningPing {
  stop(): Promise<{ transmitted: number; received: number; lost: number; output: string }>;
}

/**
 * Requests still unanswered when ping is stopped that are not counted as lost: ping's own summary counts
 * them as not received, though their replies are on the way (SIGINT ends it without waiting for them; 10
 * is 100 ms at 100 pps, a reply a loaded host is slow to deliver).
 */
const PING_IN_FLIGHT = 10;

/**
 * Starts `ping -i interval` from `netns` to `ip` (0.01 = 100 packets per second). `stop()` counts as `lost`
 * the requests with no reply before a later one was answered, and the unanswered tail when it is longer
 * than {@link PING_IN_FLIGHT} (a path that broke at the end); `output` is ping's summary.
 */
export function startPing(netns: string, ip: string, interval = 0.01): RunningPing {
  const argv = inNs(netns, ["ping", "-n", "-i", String(interval), "-W", "1", ip]);
  const child = new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped", stderr: "piped" }).spawn();
  // Every reply line is read as it comes (a full pipe would stall ping): the answered sequence numbers.
  const answered = new Set<number>();
  let last = 0;
  const other: string[] = [];
  const reading = (async () => {
    let buf = "";
    const take = (line: string) => {
      const m = /^\d+ bytes from .* icmp_seq=(\d+) /.exec(line);
      if (m && !line.includes("(DUP!)")) {
        answered.add(Number(m[1]));
        last = Math.max(last, Number(m[1]));
      } else if (!m && line.trim()) other.push(line);
    };
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      buf += chunk;
      const lines = buf.split("\n");
      buf = lines.pop()!;
      lines.forEach(take);
    }
    take(buf);
  })();
  const stderr = new Response(child.stderr).text();
  return {
    async stop() {
      try {
        child.kill("SIGINT");
      } catch { /* exited */ }
      await child.status;
      await reading;
      const output = other.join("\n") + "\n" + await stderr;
      const m = /(\d+) packets transmitted, (\d+) received/.exec(output);
      const transmitted = m ? Number(m[1]) : 0;
      const gaps = last - answered.size;
      const tail = transmitted - last;
      return {
        transmitted,
        received: m ? Number(m[2]) : 0,
        lost: gaps + (tail > PING_IN_FLIGHT ? tail : 0),
        output,
      };
    },
  };
}

/**
 * Restarts the daemons of `nodes` (all stopped, then all started) while `src` pings `dst` at 100 pps:
 * asserts no packet was lost and that `entries` (node1's kernel entries, say) are the same before and after.
 */
export async function restartUnderPing(
  s: LabState,
  nodes: NodeState[],
  src: string,
  dst: string,
  entries: () => Promise<string[]>,
): Promise<void> {
  const before = await entries();
  const p = startPing(src, dst, 0.01);
  try {
    await waitUntil("ping running", () => ping(src, dst, 1));
    for (const n of nodes) await stopDaemon(s, n);
    for (const n of nodes) await startDaemon(s, n);
    for (const n of nodes) await waitDaemonReady(s, n);
    // Keep pinging a while after all are back (restarted daemons resync everything).
    await sleep(1500);
  } finally {
    const res = await p.stop();
    // The ping must have covered the restart; how many it sent in that time is timing (a loaded host sent
    // 96 in a window that is ~150 when quiet), so the bar is well below what a quiet run sends.
    assert(res.transmitted >= 50, `too few packets: ${res.output}`);
    assertEquals(res.lost, 0, `lost packets: ${res.output}`);
  }
  assertEquals(await entries(), before);
}

/** Every pod pings every pod on other nodes (in parallel); throws listing the failures. */
export async function pingAllPods(s: LabState): Promise<number> {
  const jobs: Promise<string | null>[] = [];
  for (const a of s.pods) {
    for (const b of s.pods) {
      if (a.node === b.node || !b.ip) continue;
      jobs.push(
        runCmd(inNs(a.netns, ["ping", "-n", "-q", "-c", "3", "-i", "0.2", "-W", "1", b.ip]))
          .then((r) => r.code === 0 ? null : `${a.name} -> ${b.name} (${b.ip})`),
      );
    }
  }
  const bad = (await Promise.all(jobs)).filter((x) => x !== null);
  if (bad.length) throw new Error(`pings failed: ${bad.join(", ")}`);
  return jobs.length;
}

/**
 * Opens a TCP connection from pod `from` to pod `to` (netcat-openbsd on port 5001) and checks the bytes
 * arrive.
 */
export async function tcpAcross(s: LabState, from: string, to: string): Promise<void> {
  const a = s.pods.find((p) => p.name === from)!;
  const b = s.pods.find((p) => p.name === to)!;
  const msg = `hello from ${from} ${crypto.randomUUID()}`;
  const argv = inNs(b.netns, ["timeout", "60", "nc", "-l", "5001"]);
  const server = new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped", stderr: "piped" }).spawn();
  try {
    await waitUntil(
      "nc listening",
      async () => {
        const r = await runCmd(inNs(b.netns, ["ss", "-Htln", "sport", "= :5001"]));
        return r.stdout.includes("5001");
      },
      30_000,
      50,
    );
    await mustRun(inNs(a.netns, ["timeout", "10", "nc", "-N", "-w", "5", b.ip!, "5001"]), {
      stdin: msg + "\n",
    });
    const o = await server.output();
    const got = new TextDecoder().decode(o.stdout).trim();
    if (got !== msg) throw new Error(`TCP ${from} -> ${to}: got '${got}', want '${msg}'`);
  } finally {
    try {
      server.kill("SIGKILL");
    } catch { /* done */ }
  }
}

/** What is left of lab `name` on the host: namespaces, processes, files. Empty when fully removed. */
export async function labLeftovers(name: string, dir: string): Promise<string[]> {
  const left: string[] = [];
  for (const ns of await listNetns()) if (ns.startsWith(`${name}-`)) left.push(`netns ${ns}`);
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const c = Deno.readTextFileSync(`/proc/${e.name}/cmdline`);
      if (c.includes(dir + "/") || c.includes(dir + "\0")) {
        left.push(`process ${e.name}: ${c.replaceAll("\0", " ")}`);
      }
    } catch { /* gone */ }
  }
  try {
    Deno.statSync(dir);
    left.push(`directory ${dir}`);
  } catch { /* removed */ }
  return left;
}
