/**
 * The connectivity check `lab up` ends with, truthful at any size: it first waits until every daemon
 * reports all its peers programmed (`flanctl_peers` on /metrics), then every pod pings the first pod of
 * every other node with bounded concurrency (one `ip netns exec` per source pod, `xargs -P ping` inside it),
 * asks a silent pair again (twice, slower) before calling it failed, and explains each failure: the host's
 * neighbour table refusing entries (its counters read around the pings), a dead or lagging daemon, or a
 * missing route / ARP / FDB entry on the way.
 * @module
 */
import { inNs, isOurProcess, runCmd } from "./proc.ts";
import { hasDataPlane, type LabState, type NodeState, type PodState } from "./types.ts";
import { httpGet } from "../observe/http_get.ts";
import { hostNeighTable } from "../observe/neigh_gc.ts";
import { openNetlink, RT_TABLE_MAIN } from "../netlink/mod.ts";
import type { NeighTableInfo } from "../netlink/types.ts";
import { IPNet } from "../base/cidr.ts";
import { sleep } from "../base/sleep.ts";

/** One ping of the check. */
export interface PingResult {
  from: string;
  to: string;
  ip: string;
  ok: boolean;
  /** True when `ping` itself is not installed. */
  missing?: boolean;
  /** Rounds it took (1: first try); on a failure, the rounds tried. */
  tries?: number;
  /** Why it failed, when known. */
  reason?: string;
}

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

/** A daemon's peer count as it reports it. */
export interface DaemonPeers {
  node: string;
  /** flanctl_peers, or null when /metrics did not answer. */
  peers: number | null;
  /** False when the daemon's process is gone. */
  alive: boolean;
}

/** The convergence wait: how long it took and the daemons that did not get there. */
export interface Convergence {
  ok: boolean;
  ms: number;
  /** Peers every daemon should report (nodes − 1). */
  want: number;
  lagging: DaemonPeers[];
}

/** Runs `fn` over `items` with at most `limit` at a time; results in input order. */
export async function pool<T, R>(items: T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return out;
}

/** flanctl_peers of node `n`'s daemon (null: no answer). */
export async function daemonPeers(s: LabState, n: NodeState): Promise<number | null> {
  const r = await httpGet(n.netns, `http://127.0.0.1:${s.healthzPort}/metrics`, 3000);
  if (r.status !== 200) return null;
  const m = /^flanctl_peers (\d+)$/m.exec(r.body);
  return m ? Number(m[1]) : null;
}

function daemonAlive(s: LabState, n: NodeState): boolean {
  const p = s.procs.find((x) => x.what === `daemon ${n.name}`);
  return !!p && isOurProcess(p.pid, `${s.dir}/`);
}

/** Every daemon's peer count now (8 asked at a time). */
export function peerCounts(s: LabState): Promise<DaemonPeers[]> {
  return pool(s.nodes, 8, async (n) => ({
    node: n.name,
    peers: await daemonPeers(s, n),
    alive: daemonAlive(s, n),
  }));
}

/**
 * Waits until every daemon of `nodes` (all) reports `want` (nodes − 1) peers, or `timeoutMs` passes, or a
 * daemon died. Only the daemons still behind are asked again.
 */
export async function waitConverged(
  s: LabState,
  timeoutMs = 60_000,
  signal?: AbortSignal,
  nodes: NodeState[] = s.nodes,
  want = s.nodes.length - 1,
): Promise<Convergence> {
  const t0 = Date.now();
  let behind = nodes;
  let last: DaemonPeers[] = [];
  for (;;) {
    signal?.throwIfAborted();
    const counts = await pool(behind, 8, async (n) => ({
      node: n.name,
      peers: await daemonPeers(s, n),
      alive: daemonAlive(s, n),
    }));
    last = counts.filter((c) => c.peers !== want);
    const names = new Set(last.map((c) => c.node));
    behind = behind.filter((n) => names.has(n.name));
    if (!last.length) return { ok: true, ms: Date.now() - t0, want, lagging: [] };
    if (last.some((c) => !c.alive) || Date.now() - t0 > timeoutMs) {
      return { ok: false, ms: Date.now() - t0, want, lagging: last };
    }
    await sleep(250);
  }
}

/** One pair to ping. */
interface Pair {
  src: PodState;
  dst: PodState;
  ip: string;
}

/**
 * Ping result per target IP from one source namespace (`parallel` at a time, `count` packets each): 0 a
 * reply, 1 none, 2 an error (no statistics printed), 127 ping missing. `xargs` runs ping itself (no shell
 * per target); each ping's `-q` summary (written at its exit, one pipe write) names its target.
 */
async function pingFrom(
  netns: string,
  ips: string[],
  parallel: number,
  count: number,
): Promise<Map<string, number>> {
  const interval = count > 1 ? ["-i", "0.2"] : [];
  const r = await runCmd(
    inNs(netns, [
      "xargs",
      "-P",
      String(parallel),
      "-n",
      "1",
      "ping",
      "-n",
      "-q",
      "-c",
      String(count),
      ...interval,
      "-W",
      "1",
    ]),
    { stdin: ips.join("\n") + "\n" },
  );
  const out = new Map<string, number>();
  for (
    const m of r.stdout.matchAll(/--- (\S+) ping statistics ---\n(\d+) packets transmitted, (\d+) received/g)
  ) {
    out.set(m[1], Number(m[3]) > 0 ? 0 : 1);
  }
  for (const ip of ips) if (!out.has(ip)) out.set(ip, r.code === 127 ? 127 : 2);
  return out;
}

/** Options of {@link connectivityCheck}. */
export interface CheckOptions {
  /** Pings in flight at most (default 16). */
  parallel?: number;
  /** How long to wait for every daemon to report all peers (default 60 s). */
  convergeMs?: number;
  signal?: AbortSignal;
}

/** The whole check: convergence, every pair's result, the neighbour tables around the pings, why. */
export interface CheckReport {
  convergence: Convergence;
  results: PingResult[];
  /** Wall time of the pings (all rounds). */
  pingMs: number;
  parallel: number;
  /** The host's neighbour tables before and after the pings (a family whose table was unreadable: absent). */
  neigh: { family: 4 | 6; before: NeighTableInfo; after: NeighTableInfo }[];
  /** Why no pair was pinged (a backend without a data plane: alloc, extension). */
  skipped?: string;
}

/** The pairs: every pod to the first pod of every other node, over each family the pods have. */
function pairsOf(s: LabState): Pair[] {
  const firstPod = new Map<string, PodState>();
  for (const p of s.pods) if (!firstPod.has(p.node) && (p.ip || p.ipv6)) firstPod.set(p.node, p);
  const pairs: Pair[] = [];
  for (const p of s.pods) {
    for (const [node, target] of firstPod) {
      if (node === p.node) continue;
      for (const ip of [target.ip, target.ipv6]) if (ip) pairs.push({ src: p, dst: target, ip });
    }
  }
  return pairs;
}

/** One round over `pairs`: exit code per pair (sources `parallel / per` at a time, `per` pings each). */
async function round(pairs: Pair[], parallel: number, per: number, count: number): Promise<number[]> {
  const bySrc = new Map<string, Pair[]>();
  for (const p of pairs) {
    const list = bySrc.get(p.src.netns);
    if (list) list.push(p);
    else bySrc.set(p.src.netns, [p]);
  }
  const codes = new Map<Pair, number>();
  await pool([...bySrc], Math.max(1, Math.floor(parallel / per)), async ([netns, list]) => {
    const r = await pingFrom(netns, list.map((p) => p.ip), per, count);
    for (const p of list) codes.set(p, r.get(p.ip) ?? 2);
  });
  return pairs.map((p) => codes.get(p)!);
}

function tables(): Map<4 | 6, NeighTableInfo> {
  const m = new Map<4 | 6, NeighTableInfo>();
  for (const f of [4, 6] as const) {
    const t = hostNeighTable(f);
    if (t) m.set(f, t);
  }
  return m;
}

/** Runs the check (see the module doc). Never throws for a failed pair; explains it in `reason`. */
export async function connectivityCheck(s: LabState, o: CheckOptions = {}): Promise<CheckReport> {
  const parallel = Math.max(1, o.parallel ?? 16);
  // alloc and extension program no peer (the daemons report 0) and carry nothing between nodes.
  const plane = hasDataPlane(s.backend);
  const convergence = await waitConverged(
    s,
    o.convergeMs ?? 60_000,
    o.signal,
    s.nodes,
    plane ? undefined : 0,
  );
  const pairs = plane ? pairsOf(s) : [];
  const before = tables();
  const t0 = Date.now();
  const results: PingResult[] = pairs.map((p) => ({ from: p.src.name, to: p.dst.name, ip: p.ip, ok: false }));
  // Round 1: one packet per pair, all at once (bounded); rounds 2 and 3: the silent ones, slower.
  const plan = [
    { per: 4, count: 1, pause: 0 },
    { per: 2, count: 3, pause: 1000 },
    { per: 1, count: 5, pause: 3000 },
    // WireGuard: two nodes starting their first handshakes at once (wireguard-go) can leave one unable to
    // decrypt the other's data until a rekey 15–23 s later (seen in ~1 of 20 labs under load): the silent
    // pairs of a wireguard lab are asked again for up to ~30 s before the check calls them failed.
    ...(s.backend === "wireguard"
      ? [{ per: 1, count: 5, pause: 5000 }, { per: 1, count: 5, pause: 8000 }, {
        per: 1,
        count: 5,
        pause: 8000,
      }]
      : []),
  ];
  let todo = pairs.map((_, i) => i);
  for (let r = 0; r < plan.length && todo.length; r++) {
    o.signal?.throwIfAborted();
    if (plan[r].pause) await sleep(plan[r].pause);
    const per = Math.min(plan[r].per, parallel);
    const codes = await round(todo.map((i) => pairs[i]), parallel, per, plan[r].count);
    const again: number[] = [];
    todo.forEach((i, k) => {
      const res = results[i];
      res.tries = r + 1;
      if (codes[k] === 0) res.ok = true;
      else if (codes[k] === 127) res.missing = true;
      else if (codes[k] === 1) again.push(i); // silent: asked again
    });
    todo = again;
  }
  const pingMs = Date.now() - t0;
  const after = tables();
  const neigh = [...before].filter(([f]) => after.has(f)).map(([f, b]) => ({
    family: f,
    before: b,
    after: after.get(f)!,
  }));
  const report: CheckReport = { convergence, results, pingMs, parallel, neigh };
  if (!plane) report.skipped = `backend ${s.backend} has no data plane between nodes`;
  await explain(s, report, pairs);
  return report;
}

/** Fills `reason` of failed pairs: neighbour table, daemons, missing kernel entries (20 looked at). */
async function explain(s: LabState, r: CheckReport, pairs: Pair[]): Promise<void> {
  const failed = r.results.map((x, i) => [x, pairs[i]] as const).filter(([x]) => !x.ok && !x.missing);
  if (!failed.length) return;
  const nodes = new Map(s.nodes.map((n) => [n.name, n]));
  const status = new Map((await peerCounts(s)).map((c) => [c.node, c]));
  const want = s.nodes.length - 1;
  let inspected = 0;
  for (const [x, p] of failed) {
    const why: string[] = [];
    const fam = p.ip.includes(":") ? 6 : 4;
    const f = tableFullReason(r.neigh, fam);
    if (f) why.push(f);
    for (const node of [p.src.node, p.dst.node]) {
      const st = status.get(node);
      if (st && !st.alive) why.push(`the daemon on ${node} is not running`);
      else if (st && st.peers !== want) {
        why.push(`the daemon on ${node} reports ${st.peers ?? "no"} of ${want} peers`);
      }
    }
    if (inspected < 20) {
      inspected++;
      why.push(
        ...missingEntries(nodes.get(p.src.node), p.ip),
        ...missingEntries(nodes.get(p.dst.node), ipOf(p.src, fam)),
      );
    }
    x.reason = why.length
      ? why.join("; ")
      : `no reply in ${x.tries} tries, kernel entries in place (flanctl lab trace --probe ${x.from} ${x.to})`;
  }
}

/** The neighbour table of `family` refused entries between the two reads: why a pair failed. */
export function tableFullReason(neigh: CheckReport["neigh"], family: 4 | 6): string | null {
  const f = neigh.find((n) => n.family === family && n.after.tableFulls > n.before.tableFulls);
  if (!f) return null;
  return `neighbour table full: ${f.after.name} refused ${
    f.after.tableFulls - f.before.tableFulls
  } entries ` +
    `during the check (${f.after.entries} entries host-wide, gc_thresh3 ${f.after.gcThresh3}; see flanctl ` +
    "doctor, lab up --tune-host)";
}

function ipOf(p: PodState, fam: 4 | 6): string | null {
  return (fam === 4 ? p.ip : p.ipv6) ?? null;
}

/** What is missing on `n` on the way to `ip`: its route, and for a VXLAN route the ARP and FDB entries. */
function missingEntries(n: NodeState | undefined, ip: string | null): string[] {
  if (!n || !ip) return [];
  try {
    const h = openNetlink({ name: n.netns });
    try {
      const fam = ip.includes(":") ? 6 : 4;
      const dst = IPNet.parse(`${ip}/${fam === 4 ? 32 : 128}`, "ip");
      const routes = h.routes({ family: fam, table: RT_TABLE_MAIN }).filter((r) => {
        const net = r.dst === "default" ? null : IPNet.tryParse(r.dst);
        return net?.contains(dst) && net.prefix < dst.prefix;
      }).sort((a, b) => Number(b.dst.split("/")[1]) - Number(a.dst.split("/")[1]));
      const r = routes[0];
      if (!r) return [`${n.name} has no route to ${ip} (but the default)`];
      const dev = h.links().find((l) => l.index === r.dev);
      if (dev?.kind !== "vxlan" || !r.gateway) return [];
      const ne = h.neighbours(fam).find((x) => x.index === dev.index && x.dst === r.gateway && x.lladdr);
      if (!ne) return [`${n.name} has no neighbour entry for ${r.gateway} on ${dev.name}`];
      const fdb = h.fdb().some((x) =>
        x.index === dev.index && x.mac.toLowerCase() === ne.lladdr!.toLowerCase()
      );
      return fdb ? [] : [`${n.name} has no FDB entry for ${ne.lladdr} on ${dev.name}`];
    } finally {
      h.close();
    }
  } catch (e) {
    return [`cannot read ${n.name}'s kernel state: ${(e as Error).message}`];
  }
}

/** The check as text lines: convergence, the verdict, failures (first `show`), the neighbour tables. */
export function formatCheck(r: CheckReport, show = 20): string[] {
  const lines: string[] = [];
  const c = r.convergence;
  lines.push(
    c.ok
      ? `daemons: every one reports all ${c.want} peers (${(c.ms / 1000).toFixed(1)} s)`
      : `daemons: ${c.lagging.length} not converged after ${(c.ms / 1000).toFixed(1)} s: ` +
        c.lagging.slice(0, 10).map((d) =>
          `${d.node} ${d.alive ? `${d.peers ?? "no answer"}/${c.want}` : "not running"}`
        ).join(", ") + (c.lagging.length > 10 ? `, … ${c.lagging.length - 10} more` : ""),
  );
  if (r.skipped) lines.push(`cross-node ping: skipped, ${r.skipped}`);
  if (!r.results.length) return lines;
  if (r.results.every((x) => x.missing)) {
    lines.push("cross-node ping: skipped, `ping` is not installed (apt-get install iputils-ping)");
    return lines;
  }
  const bad = r.results.filter((x) => !x.ok);
  const retried = r.results.filter((x) => x.ok && (x.tries ?? 1) > 1).length;
  const secs = (r.pingMs / 1000).toFixed(1);
  lines.push(
    `cross-node ping: ${r.results.length} pairs (every pod to the first pod of every other node), ` +
      `${r.parallel} at a time, ${secs} s`,
  );
  if (!bad.length) {
    lines.push(`all ${r.results.length} ok${retried ? ` (${retried} answered on a retry)` : ""}`);
  } else {
    for (const x of bad.slice(0, show)) {
      lines.push(
        `  ${x.from} -> ${x.to} (${x.ip}): FAILED: ${x.missing ? "ping is not installed" : x.reason}`,
      );
    }
    if (bad.length > show) lines.push(`  … and ${bad.length - show} more`);
    lines.push(
      `${bad.length} of ${r.results.length} FAILED after ${Math.max(...bad.map((x) => x.tries ?? 1))} tries`,
    );
  }
  for (const n of r.neigh) {
    const d = n.after.tableFulls - n.before.tableFulls, g = n.after.forcedGcRuns - n.before.forcedGcRuns;
    if (d || g || !bad.length) continue;
    lines.push(
      `${n.after.name}: ${n.after.entries} entries, table_fulls +${d}, forced_gc_runs +${g} during the pings`,
    );
  }
  for (const n of r.neigh) {
    const d = n.after.tableFulls - n.before.tableFulls, g = n.after.forcedGcRuns - n.before.forcedGcRuns;
    if (!d && !g) continue;
    lines.push(
      `${n.after.name}: table_fulls +${d}, forced_gc_runs +${g} during the pings (${n.after.entries} entries, ` +
        `gc_thresh2/3 ${n.after.gcThresh2}/${n.after.gcThresh3}; host-wide)`,
    );
  }
  return lines;
}
