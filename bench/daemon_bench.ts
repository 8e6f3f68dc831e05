/**
 * Daemon benchmark, in throwaway namespaces:
 * - speed (file store): convergence: a lease appears in the store → its route on the node (seen by
 *   `ip monitor`), p50/p99 over 100 joins (goal p99 < 50 ms); reference: programming the same triplet with
 *   three `ip` commands; 1,000 leases written at once → all 1,000 routes programmed (goal < 2 s); reference:
 *   the same 3,000 entries through one `ip -batch`; for the default V8 settings and for
 *   --max-semi-space-size=1,--jitless;
 * - memory (issue 13's goal: RSS ≤ 50 MiB with 100 peers and ≤ 64 MiB with 5,000, etcd store, vxlan, as
 *   the installed service runs it): at 0, 100, 1,000 and 5,000 peers (added while it runs) and after a
 *   restart with the 5,000 in place, the daemon's peak (VmHWM over the point: the burst that got there
 *   included) and steady memory from /proc/PID/smaps_rollup: RSS, Pss, private (Private_Clean+Private_Dirty),
 *   shared (Shared_Clean+Shared_Dirty), anonymous and file-backed, plus the JS heap from /metrics and the
 *   time to program each step. Configurations: 0-2 main.ts from this checkout under three V8 settings
 *   (default, --max-semi-space-size=1, and that plus --jitless), 3 "as installed": cli/daemon_entry.ts
 *   bundled into a temp dir the way install.sh does and run with the launcher's `deno run` flags, V8 flags
 *   and environment (read from install.sh's DAEMON_V8_FLAGS / DAEMON_ENV lines). References printed in the
 *   same run: flannel's manifest figure for flanneld (50 Mi; flanneld is not installed here) and, per
 *   configuration, the same runtime and flags running an empty script (the floor).
 * Environment: DAEMON_BENCH_ONLY=speed|memory runs one half; DAEMON_BENCH_STORE=etcd (etcd in the underlay
 * namespace, leases written by bench/etcd_fill.ts) instead of the file store; DAEMON_BENCH_CONFIGS=3 (or
 * 0,3, …) picks configurations; DAEMON_BENCH_VARIANTS='[{"name":"…","v8":"…","env":{"K":"v"}}]' adds
 * as-installed variants with other V8 flags / environment (candidates); DAEMON_BENCH_ROUNDS (default 3)
 * interleaved rounds, medians printed; DAEMON_BENCH_WINDOW_MS (default 12000) the settle time per point.
 * Fake peers are leases in the store's documented layout: the daemon cannot tell them from real nodes, and
 * programming does not need the peers to exist.
 *
 *   DAEMON_BENCH_ONLY=memory DAEMON_BENCH_STORE=etcd DAEMON_BENCH_CONFIGS=3 deno task bench daemon_bench
 * @module
 */
import { DaemonCluster, spawnEtcd, waitFor } from "../tests/daemon_fixture.ts";
import { nsRun, ROOT, sh } from "../tests/netns.ts";
import { countRoutes } from "./daemon_probe.ts";
import { FileStore } from "../lib/store/file/file.ts";
import { randomLocalMac } from "../lib/backend/vtep_mac.ts";
import {
  bundleDaemon,
  installDaemonInto,
  installedDaemonCmd,
  type LauncherSettings,
  launcherSettings,
} from "../tests/installed_daemon.ts";

const NETWORK = "10.0.0.0/8"; // room for 65,536 /24 subnets; the underlay is 172.31.0.0/24
const JOINS = 100;

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

function subnetN(i: number): string {
  return `10.${(i >> 8) & 255}.${i & 255}.0`;
}

/** Watches `ip monitor route` in `ns` and resolves waiters when a route to `dst` appears. */
class RouteMonitor {
  #waiters = new Map<string, (t: number) => void>();
  /** First time each route was seen (so a route programmed before anyone waits is not missed). */
  #seen = new Map<string, number>();
  #proc: Deno.ChildProcess;
  constructor(ns: string) {
    const proc = new Deno.Command("ip", {
      args: ["-n", ns, "monitor", "route"],
      stdout: "piped",
      stderr: "null",
    })
      .spawn();
    this.#proc = proc;
    (async () => {
      let buf = "";
      for await (const chunk of proc.stdout.pipeThrough(new TextDecoderStream())) {
        const t = performance.now();
        buf += chunk;
        const lines = buf.split("\n");
        buf = lines.pop()!;
        for (const l of lines) {
          if (l.startsWith("Deleted")) continue;
          const dst = l.split(" ")[0];
          if (!this.#seen.has(dst)) this.#seen.set(dst, t);
          const w = this.#waiters.get(dst);
          if (w) {
            this.#waiters.delete(dst);
            w(t);
          }
        }
      }
    })().catch(() => {});
  }
  wait(dst: string): Promise<number> {
    const t = this.#seen.get(dst);
    return t !== undefined ? Promise.resolve(t) : new Promise((r) => this.#waiters.set(dst, r));
  }
  close() {
    try {
      this.#proc.kill("SIGKILL");
    } catch { /* gone */ }
  }
}

/**
 * Prepares `n` fake vxlan leases (subnets from index `from`) in the store's tmp dir; the returned function
 * renames them into place back to back ("inserted at once").
 */
async function prepareFakeLeases(storeDir: string, from: number, n: number): Promise<() => Promise<void>> {
  const exp = new Date(Date.now() + 24 * 3600_000).toISOString();
  const seqFile = `${storeDir}/seq`;
  let seq = Number((await Deno.readTextFile(seqFile).catch(() => "0")).trim()) || 0;
  const files: [string, string][] = [];
  for (let i = from; i < from + n; i++) {
    seq++;
    const lease = {
      PublicIP: `172.30.${(i >> 8) & 255}.${i & 255}`,
      PublicIPv6: null,
      BackendType: "vxlan",
      BackendData: { VNI: 1, VtepMAC: randomLocalMac() },
    };
    files.push([`${subnetN(i)}-24`, JSON.stringify({ lease, expiration: exp, seq }) + "\n"]);
  }
  for (const [key, text] of files) await Deno.writeTextFile(`${storeDir}/tmp/${key}`, text);
  return async () => {
    for (const [key] of files) await Deno.rename(`${storeDir}/tmp/${key}`, `${storeDir}/subnets/${key}`);
    await Deno.writeTextFile(seqFile, `${seq}\n`);
  };
}

async function referenceTriplet(ns: string): Promise<number> {
  // Three ip commands for one peer on a scratch vxlan device in the same namespace.
  await sh(
    "ip",
    "-n",
    ns,
    "link",
    "add",
    "refvx",
    "type",
    "vxlan",
    "id",
    "99",
    "dstport",
    "4799",
    "nolearning",
  );
  await sh("ip", "-n", ns, "link", "set", "refvx", "up");
  const times: number[] = [];
  for (let i = 0; i < 20; i++) {
    const mac = randomLocalMac();
    const t0 = performance.now();
    await sh(
      "ip",
      "-n",
      ns,
      "neigh",
      "replace",
      `10.250.${i}.0`,
      "lladdr",
      mac,
      "dev",
      "refvx",
      "nud",
      "permanent",
    );
    await sh("ip", "-n", ns, "link", "show", "refvx"); // keep the shape: a read between writes
    await sh(
      "ip",
      "netns",
      "exec",
      ns,
      "bridge",
      "fdb",
      "replace",
      mac,
      "dev",
      "refvx",
      "dst",
      "172.29.0.1",
      "self",
      "permanent",
    );
    await sh(
      "ip",
      "-n",
      ns,
      "route",
      "replace",
      `10.250.${i}.0/24`,
      "via",
      `10.250.${i}.0`,
      "dev",
      "refvx",
      "onlink",
    );
    times.push(performance.now() - t0);
  }
  return pct(times, 50);
}

async function referenceBatch(ns: string, n: number): Promise<number> {
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    const mac = randomLocalMac();
    const gw = `10.251.${(i >> 8) & 255}.${i & 255}`;
    lines.push(`neigh replace ${gw} lladdr ${mac} dev refvx nud permanent`);
    lines.push(`route replace ${gw}/32 via ${gw} dev refvx onlink`);
  }
  const fdb = Array.from(
    { length: n },
    (_, i) =>
      `fdb replace 02:00:00:00:${((i >> 8) & 255).toString(16).padStart(2, "0")}:${
        (i & 255).toString(16).padStart(2, "0")
      } dev refvx dst 172.29.0.1 self permanent`,
  );
  const t0 = performance.now();
  const r1 = await nsRun(ns, ["ip", "-batch", "-"], { stdin: lines.join("\n") + "\n" });
  const r2 = await nsRun(ns, ["bridge", "-batch", "-"], { stdin: fdb.join("\n") + "\n" });
  const dt = performance.now() - t0;
  if (r1.code !== 0 || r2.code !== 0) throw new Error(`reference batch failed: ${r1.stderr}${r2.stderr}`);
  return dt;
}

/** Memory of a process from /proc/PID/smaps_rollup and /proc/PID/status, KiB. */
interface Rollup {
  rss: number;
  pss: number;
  /** Private_Clean + Private_Dirty: pages only this process maps. */
  priv: number;
  /** Shared_Clean + Shared_Dirty: pages other processes map too (mostly the Deno binary's code). */
  shared: number;
  anon: number;
  /** RssFile + RssShmem: file-backed resident pages. */
  file: number;
  /** VmHWM: peak RSS since start or since the last {@link resetPeak}. */
  hwm: number;
}

function rollup(pid: number): Rollup {
  const t = Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`);
  const st = Deno.readTextFileSync(`/proc/${pid}/status`);
  const g = (s: string, k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(s)?.[1] ?? NaN);
  return {
    rss: g(t, "Rss"),
    pss: g(t, "Pss"),
    priv: g(t, "Private_Clean") + g(t, "Private_Dirty"),
    shared: g(t, "Shared_Clean") + g(t, "Shared_Dirty"),
    anon: g(t, "Anonymous"),
    file: g(st, "RssFile") + g(st, "RssShmem"),
    hwm: g(st, "VmHWM"),
  };
}

/** Resets the process's VmHWM to its current RSS (proc(5), clear_refs "5"). */
function resetPeak(pid: number): void {
  Deno.writeTextFileSync(`/proc/${pid}/clear_refs`, "5");
}

/** One daemon configuration of the memory half. */
interface Variant {
  name: string;
  /** The daemon's command without its arguments; default `flanctl daemon` from this checkout's main.ts. */
  cmd?: string[];
  env: Record<string, string>;
  /** The same runtime running an empty script (the floor of this configuration). */
  floor: string[];
}

/** One measured point: peak (VmHWM over the point, including the burst that got there) and steady state. */
interface Point {
  /** VmHWM since the point's work started (the 0-peer and restart points: since the process started). */
  peak: number;
  /** The rollup at the end of the point's window. */
  steady: Rollup;
  /** JS heap in use (MiB) from the daemon's /metrics at the end of the window. */
  heapUsed: number;
  /** From the start of the point's store writes to all routes programmed (ms); NaN where not applicable. */
  programMs: number;
}

const POINTS = ["0", "100", "1000", "5000", "5000 restart"] as const;
type PointName = typeof POINTS[number];

/** Memory of one daemon of `v` at 0, 100, 1,000 and 5,000 peers, then restarted with the 5,000 in place. */
async function memRun(v: Variant, etcdStore: boolean, windowMs: number): Promise<{
  points: Record<PointName, Point>;
  passes: number[];
}> {
  const c = new DaemonCluster("172.31");
  let etcd: Deno.ChildProcess | null = null;
  const url = "http://172.31.0.1:2379";
  const conf = JSON.stringify({ Network: NETWORK, SubnetLen: 24, Backend: { Type: "vxlan" } });
  try {
    await c.init(etcdStore ? undefined : conf);
    const a = await c.addNode();
    let fill: (from: number, n: number) => Promise<void>;
    if (etcdStore) {
      etcd = spawnEtcd(c.underlay, `${c.tmp}/etcd`, url);
      await waitFor(
        "etcd up",
        async () =>
          (await nsRun(c.underlay, [
            "etcdctl",
            "--endpoints",
            url,
            "put",
            "/coreos.com/network/config",
            conf,
          ]))
            .code === 0,
        30_000,
      );
      fill = async (from, n) => {
        const r = await nsRun(c.underlay, [
          ...[Deno.execPath(), "run", "-A", "--no-check", `${HERE}etcd_fill.ts`],
          ...[url, `${from}`, `${n}`],
        ]);
        if (r.code !== 0) throw new Error(`etcd_fill: ${r.stderr}`);
      };
    } else {
      fill = async (from, n) => await (await prepareFakeLeases(c.storeDir, from, n))();
    }
    const args = [...(etcdStore ? ["--etcd-endpoints", url] : []), "--log-level", "debug"];
    c.start(a, args, v.env, v.cmd);
    await c.waitReady(a);
    let pid = a.proc!.pid;
    const point = async (work: (() => Promise<void>) | null): Promise<Point> => {
      let programMs = NaN;
      if (work) {
        resetPeak(pid);
        const t0 = performance.now();
        await work();
        programMs = performance.now() - t0;
      }
      await new Promise((r) => setTimeout(r, windowMs));
      const steady = rollup(pid);
      const body = (await c.http(a, "/metrics"))[1];
      const heapUsed = Number(/^flanctl_heap_used_bytes (\d+)/m.exec(body)?.[1] ?? NaN) / 1048576;
      return { peak: steady.hwm, steady, heapUsed, programMs };
    };
    const grow = (from: number, n: number, total: number) => async () => {
      await fill(from, n);
      await waitFor(`${total} programmed`, async () => (await countRoutes(a.ns)) >= total, 120_000);
    };
    const p0 = await point(null);
    const p100 = await point(grow(1000, 100, 100));
    const p1000 = await point(grow(1100, 900, 1000));
    const p5000 = await point(grow(2000, 4000, 5000));
    const passes = a.log.filter((l) => l.includes("msg=reconciled") && l.includes("peers=5000"))
      .map((l) => Number(/ ms=(\d+)/.exec(l)?.[1] ?? NaN)).filter((x) => !isNaN(x));
    // A node restarting in a 5,000-node cluster: the initial list of every lease at start-up.
    await c.stop(a);
    c.start(a, args, v.env, v.cmd);
    await c.waitReady(a, 120_000);
    pid = a.proc!.pid;
    await waitFor(
      "a full pass over 5000 peers after the restart",
      () => a.log.some((l) => l.includes("msg=reconciled") && l.includes("peers=5000")),
      120_000,
    );
    const pR = await point(null);
    return { points: { "0": p0, "100": p100, "1000": p1000, "5000": p5000, "5000 restart": pR }, passes };
  } finally {
    try {
      etcd?.kill("SIGKILL");
      await etcd?.status;
    } catch { /* gone */ }
    await c.close();
  }
}

/** The floor of `v`: its runtime running an empty script, 2 s after start. */
async function floorOf(v: Variant): Promise<Rollup> {
  const p = new Deno.Command(v.floor[0], {
    args: v.floor.slice(1),
    env: v.env,
    stdout: "null",
    stderr: "null",
  }).spawn();
  await new Promise((r) => setTimeout(r, 2000));
  const m = rollup(p.pid);
  p.kill("SIGKILL");
  await p.status;
  return m;
}

const HERE = new URL(".", import.meta.url).pathname;

/** Convergence and burst timings for one daemon started with `env` (e.g. DENO_V8_FLAGS). */
interface Speed {
  conv: number[];
  refTriplet: number;
  burst1000: number;
  refBatch: number;
  burst4000: number;
}

async function speedRun(env: Record<string, string>): Promise<Speed> {
  const c = new DaemonCluster("172.31");
  const conv: number[] = [];
  let refTriplet = 0, burst1000 = 0, refBatch = 0, burst4000 = 0;
  try {
    await c.init(JSON.stringify({ Network: NETWORK, SubnetLen: 24, Backend: { Type: "vxlan" } }));
    const a = await c.addNode();
    c.start(a, [], env);
    await c.waitReady(a);

    // 1. Convergence of single joins.
    const store = new FileStore({ dir: c.storeDir });
    const mon = new RouteMonitor(a.ns);
    await new Promise((r) => setTimeout(r, 200));
    for (let i = 0; i < JOINS; i++) {
      const pub = `172.29.${i >> 8}.${(i & 255) + 1}`;
      const t0 = performance.now();
      const lease = store.acquireLease({
        PublicIP: pub,
        PublicIPv6: null,
        BackendType: "vxlan",
        BackendData: { VNI: 1, VtepMAC: randomLocalMac() },
      });
      // The subnet is only known when the write returns; the monitor remembers routes seen before that.
      const seen = lease.then((l) => mon.wait(l.subnet!.toString()));
      const t = await Promise.race([
        seen,
        new Promise<never>((_, rej) =>
          setTimeout(() => rej(new Error(`join ${i} not programmed in 5 s`)), 5000)
        ),
      ]);
      conv.push(t - t0);
    }
    mon.close();
    refTriplet = await referenceTriplet(a.ns);

    // Remove the 100 joins again (revoke) and wait until their routes are gone.
    for (const l of (await store.listLeases()).leases) {
      if (l.attrs.PublicIP.startsWith("172.29.")) await store.revokeLease(l.subnet!);
    }
    await waitFor("joins removed", async () => (await countRoutes(a.ns)) === 0, 20_000);

    // 2. 1,000 leases at once, then 4,000 more.
    let commit = await prepareFakeLeases(c.storeDir, 1000, 1000);
    let t0 = performance.now();
    await commit();
    await waitFor("1000 programmed", async () => (await countRoutes(a.ns)) >= 1000, 60_000);
    burst1000 = performance.now() - t0;
    refBatch = await referenceBatch(a.ns, 1000);
    commit = await prepareFakeLeases(c.storeDir, 2000, 4000);
    t0 = performance.now();
    await commit();
    await waitFor("5000 programmed", async () => (await countRoutes(a.ns)) >= 5000, 120_000);
    burst4000 = performance.now() - t0;
  } finally {
    await c.close();
  }
  return { conv, refTriplet, burst1000, refBatch, burst4000 };
}

// The V8 settings compared: the default, deploy/flanctl.service's 1 MiB young generation, and that plus
// --jitless (no optimizing compiler: its code pages in the Deno binary are never touched).
const CONFIGS: [string, Record<string, string>][] = [
  ["default V8 settings", {}],
  ["DENO_V8_FLAGS=--max-semi-space-size=1", { DENO_V8_FLAGS: "--max-semi-space-size=1" }],
  ["DENO_V8_FLAGS=--max-semi-space-size=1,--jitless", { DENO_V8_FLAGS: "--max-semi-space-size=1,--jitless" }],
];
const only = Deno.env.get("DAEMON_BENCH_ONLY"); // "speed" or "memory": run one half
const speeds: [string, Speed][] = [];
if (only !== "memory") {
  for (const [name, env] of [CONFIGS[0], CONFIGS[2]]) speeds.push([name, await speedRun(env)]);
}

/**
 * The daemon as install.sh installs it: cli/daemon_entry.ts bundled into `dir`/daemon.js with install.sh's
 * flags, `dir`/src a link to this checkout ($FLANCTL_LIBDIR/src: the udp worker), run with the launcher's
 * `deno run` flags, V8 flags and environment; `o` replaces them (DAEMON_BENCH_VARIANTS, DAEMON_BENCH_REF).
 */
function installed(
  dir: string,
  name: string,
  o: { v8?: string; flags?: string; env?: Record<string, string>; js?: string } = {},
): Variant {
  const l = launcherSettings();
  const run = { flags: o.flags?.split(/\s+/).filter(Boolean) ?? l.flags, v8: o.v8 ?? l.v8 };
  return {
    name,
    cmd: installedDaemonCmd(o.js ?? `${dir}/daemon.js`, run),
    env: { DENO_NO_UPDATE_CHECK: "1", ...(o.env ?? l.env), FLANCTL_LIBDIR: dir },
    floor: installedDaemonCmd(`${dir}/empty.js`, run),
  };
}

const memVariants: Variant[] = [];
let bundleDir = "";
const rounds = Number(Deno.env.get("DAEMON_BENCH_ROUNDS") ?? 3);
const windowMs = Number(Deno.env.get("DAEMON_BENCH_WINDOW_MS") ?? 12_000);
const etcdStore = Deno.env.get("DAEMON_BENCH_STORE") === "etcd";
// Memory runs, interleaved: round r measures every variant once, in order.
const mems = new Map<string, { points: Record<PointName, Point>; passes: number[]; floor: Rollup }[]>();
try {
  if (only !== "speed") {
    bundleDir = await Deno.makeTempDir({ prefix: "flanctl-daemon-bench-" });
    await installDaemonInto(bundleDir);
    await Deno.writeTextFile(`${bundleDir}/empty.js`, "setTimeout(() => {}, 600_000);\n");
    const fromSource = ([name, env]: [string, Record<string, string>]): Variant => ({
      name: `${name}, main.ts`,
      env,
      floor: [Deno.execPath(), "run", "-A", "--no-check", "--quiet", `${bundleDir}/empty.js`],
    });
    const l = launcherSettings();
    // DAEMON_BENCH_CONFIGS=0,3 measures those only: 0-2 CONFIGS from main.ts, 3 as installed.
    const all = [
      ...CONFIGS.map(fromSource),
      installed(
        bundleDir,
        `as installed (${[...l.flags, l.v8].join(" ")} ${
          Object.entries(l.env).map(([k, x]) => `${k}=${x}`).join(" ")
        })`,
      ),
    ];
    const pick = Deno.env.get("DAEMON_BENCH_CONFIGS")?.split(",").map(Number);
    memVariants.push(...all.filter((_, i) => !pick || pick.includes(i)));
    // DAEMON_BENCH_VARIANTS='[{"name":"…","flags":"…","v8":"…","env":{…}}]': more as-installed variants.
    const extra = JSON.parse(Deno.env.get("DAEMON_BENCH_VARIANTS") ?? "[]") as {
      name: string;
      flags?: string;
      v8?: string;
      env?: Record<string, string>;
    }[];
    for (const x of extra) memVariants.push(installed(bundleDir, x.name, x));
    // DAEMON_BENCH_REF=main: that revision's cli/daemon_entry.ts bundled the same way, run with
    // DAEMON_BENCH_REF_FLAGS / DAEMON_BENCH_REF_V8 (default: that revision's launcher, from its install.sh's
    // DAEMON_* lines; --max-semi-space-size=1 for revisions without them).
    const ref = Deno.env.get("DAEMON_BENCH_REF");
    if (ref) {
      const refDir = `${bundleDir}/ref`;
      await Deno.mkdir(refDir);
      const a = await new Deno.Command("sh", {
        args: ["-c", `git -C '${ROOT}' archive '${ref}' | tar -x -C '${refDir}'`],
      }).output();
      if (!a.success) throw new Error(`git archive ${ref} failed`);
      await bundleDaemon(`${bundleDir}/ref.js`, `${refDir}/`);
      let refLauncher: LauncherSettings | null = null;
      try {
        refLauncher = launcherSettings(`${refDir}/`);
      } catch { /* an older install.sh without the DAEMON_* lines */ }
      const v8 = Deno.env.get("DAEMON_BENCH_REF_V8") ?? refLauncher?.v8 ?? "--max-semi-space-size=1";
      const flags = Deno.env.get("DAEMON_BENCH_REF_FLAGS") ?? refLauncher?.flags.join(" ") ?? "";
      memVariants.push(
        installed(bundleDir, `${ref} as installed (${flags} ${v8})`, {
          v8,
          flags,
          env: refLauncher?.env ?? {},
          js: `${bundleDir}/ref.js`,
        }),
      );
    }
    for (let r = 0; r < rounds; r++) {
      for (const v of memVariants) {
        const res = await memRun(v, etcdStore, windowMs);
        const floor = await floorOf(v);
        mems.set(v.name, [...(mems.get(v.name) ?? []), { ...res, floor }]);
        console.error(`round ${r + 1}/${rounds}: ${v.name} measured`);
      }
    }
  }
} finally {
  if (bundleDir) await Deno.remove(bundleDir, { recursive: true });
}

const f = (x: number) => x.toFixed(1);
const mib = (k: number) => (k / 1024).toFixed(1);
const med = (xs: number[]) => {
  const s = xs.filter((x) => !isNaN(x)).sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN;
};
console.log("daemon benchmark (vxlan, one node in a netns)");
for (const [name, { conv, refTriplet, burst1000, refBatch, burst4000 }] of speeds) {
  console.log(`speed (${name}, file store):`);
  console.log(
    `  convergence, ${JOINS} joins (from the start of the store write): p50 ${f(pct(conv, 50))} ms, ` +
      `p99 ${f(pct(conv, 99))} ms, max ${f(Math.max(...conv))} ms; goal p99 < 50 ms: ${
        pct(conv, 99) < 50 ? "met" : "MISSED"
      }`,
  );
  console.log(
    `    reference (same run): neigh+fdb+route by 3 ip/bridge commands p50 ${f(refTriplet)} ms; ` +
      `daemon p50 / reference = ${(pct(conv, 50) / refTriplet).toFixed(2)}x`,
  );
  console.log(
    `  1,000 leases at once → all programmed: ${f(burst1000)} ms; goal < 2000 ms: ${
      burst1000 < 2000 ? "met" : "MISSED"
    }`,
  );
  console.log(
    `    reference (same run): 3,000 entries via ip -batch + bridge -batch: ${f(refBatch)} ms; ` +
      `ratio ${(burst1000 / refBatch).toFixed(2)}x`,
  );
  console.log(`  4,000 more at once (→ 5,000 peers): ${f(burst4000)} ms`);
}
if (mems.size) {
  // flannel's Documentation/kube-flannel.yml gives the kube-flannel container resources.requests.memory
  // 50Mi (flanneld itself is not installed here, so the manifest's figure is the reference).
  const FLANNEL_MANIFEST_MIB = 50;
  console.log(
    `daemon memory, ${etcdStore ? "etcd" : "file"} store, medians of ${rounds} interleaved round(s), MiB; ` +
      `peak = VmHWM over the point (reset when its store writes start; 0 and restart: since process start), ` +
      `steady = smaps_rollup ${windowMs / 1000} s after the point's routes are programmed; ` +
      `private = Private_Clean+Private_Dirty, shared = Shared_Clean+Shared_Dirty`,
  );
  console.log(`reference: flannel's kube-flannel.yml gives flanneld ${FLANNEL_MANIFEST_MIB} Mi of memory`);
  for (const v of memVariants) {
    const rs = mems.get(v.name)!;
    const m = (fn: (x: (typeof rs)[number]) => number) => mib(med(rs.map(fn)));
    console.log(`${v.name}:`);
    console.log(
      `  floor (empty script, same runtime and flags): RSS ${m((x) => x.floor.rss)}, Pss ${
        m((x) => x.floor.pss)
      }, private ${m((x) => x.floor.priv)}, shared ${m((x) => x.floor.shared)}, anon ${
        m((x) => x.floor.anon)
      }, file ${m((x) => x.floor.file)}`,
    );
    for (const p of POINTS) {
      const s = (k: keyof Rollup) => m((x) => x.points[p].steady[k]);
      const ms = med(rs.map((x) => x.points[p].programMs));
      console.log(
        `  ${p.padStart(12)} peers: peak ${m((x) => x.points[p].peak)} | steady RSS ${s("rss")}, Pss ${
          s("pss")
        }, private ${s("priv")}, shared ${s("shared")}, anon ${s("anon")}, file ${s("file")}, JS heap ${
          f(med(rs.map((x) => x.points[p].heapUsed)))
        }${isNaN(ms) ? "" : `; programmed in ${f(ms)} ms`}`,
      );
    }
    const peak = (p: PointName) => med(rs.map((x) => x.points[p].peak)) / 1024;
    const steady = (p: PointName) => med(rs.map((x) => x.points[p].steady.rss)) / 1024;
    const verdict = (p: PointName, lim: number) =>
      `peak ${f(peak(p))} ${peak(p) <= lim ? "met" : "MISSED"}, steady ${f(steady(p))} ${
        steady(p) <= lim ? "met" : "MISSED"
      }`;
    console.log(
      `  goal RSS ≤ 50 MiB @100 peers: ${verdict("100", 50)} (${
        (steady("100") / FLANNEL_MANIFEST_MIB).toFixed(2)
      }x flannel's ${FLANNEL_MANIFEST_MIB} Mi); ≤ 64 MiB @5000: ${verdict("5000", 64)}; ` +
        `restart @5000: ${verdict("5000 restart", 64)}`,
    );
    const passes = rs.flatMap((x) => x.passes);
    console.log(
      `  full reconcile pass at 5,000 peers: ${
        passes.length ? `median ${pct(passes, 50)} ms over ${passes.length}` : "n/a"
      }`,
    );
  }
}
