/**
 * Daemon benchmark, in throwaway namespaces with the file store:
 * - convergence: a lease appears in the store → its route on the node (seen by `ip monitor`), p50/p99
 *   over 100 joins (goal p99 < 50 ms); reference: programming the same triplet with three `ip` commands;
 * - 1,000 leases written at once → all 1,000 routes programmed (goal < 2 s); reference: the same 3,000
 *   entries through one `ip -batch`;
 * - daemon RSS (and its private / file-backed parts, and the JS heap from /metrics) with 0, 1,000 and 5,000
 *   peers (goal ≤ 64 MiB at 5,000) under three V8 settings (default, deploy/flanctl.service's
 *   --max-semi-space-size=1, and that plus --jitless), the duration of a full reconcile pass at 5,000
 *   peers, and an idle `deno run` as the runtime's own floor;
 * - the timings above for the default settings and for --max-semi-space-size=1,--jitless.
 * DAEMON_BENCH_ONLY=speed or =memory runs one half; DAEMON_BENCH_STORE=etcd measures the memory half on the
 * etcd store (etcd in the underlay namespace) instead of the file store.
 * Fake peers are lease files in the store's documented layout (lib/store/file.ts): the daemon cannot
 * tell them from real nodes, and programming does not need the peers to exist.
 * @module
 */
import { DaemonCluster, spawnEtcd, waitFor } from "../tests/daemon_fixture.ts";
import { nsRun, sh } from "../tests/netns.ts";
import { FileStore } from "../lib/store/file.ts";
import { randomLocalMac } from "../lib/backend/vtep_mac.ts";

const NETWORK = "10.0.0.0/8"; // room for 65,536 /24 subnets; the underlay is 172.31.0.0/24
const JOINS = 100;

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

function subnetN(i: number): string {
  return `10.${(i >> 8) & 255}.${i & 255}.0`;
}

/** VmRSS, RssAnon (private memory) and RssFile (mapped files: mostly the Deno binary's code) in KiB. */
async function rssKiB(pid: number): Promise<[number, number, number]> {
  const st = await Deno.readTextFile(`/proc/${pid}/status`);
  const g = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(st)![1]);
  return [g("VmRSS"), g("RssAnon"), g("RssFile")];
}

/** Memory of an idle `deno run` of an empty script after 2 s (the runtime's own floor), KiB. */
async function idleDeno(): Promise<[number, number, number]> {
  const p = new Deno.Command(Deno.execPath(), {
    args: ["run", "--quiet", "data:application/javascript,setTimeout(()=>{},3000)"],
    stdout: "null",
    stderr: "null",
  }).spawn();
  await new Promise((r) => setTimeout(r, 2000));
  const m = await rssKiB(p.pid);
  p.kill("SIGKILL");
  await p.status;
  return m;
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

async function countRoutes(ns: string): Promise<number> {
  const out = await sh("ip", "-n", ns, "route", "show", "dev", "flannel.1");
  return out.split("\n").filter((l) => l.includes("onlink")).length;
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

/** Peak and last memory over a sampling window (KiB). */
interface Mem {
  peak: number;
  last: number;
  anonPeak: number;
  anonLast: number;
  fileLast: number;
  /** JavaScript heap in use (MiB) from the daemon's /metrics at the end of the window. */
  heapUsed: number;
}

/** Samples the daemon's memory every 250 ms for `ms`. */
async function rssOver(pid: number, ms: number): Promise<Mem> {
  const m: Mem = { peak: 0, last: 0, anonPeak: 0, anonLast: 0, fileLast: 0, heapUsed: NaN };
  const end = Date.now() + ms;
  while (Date.now() < end) {
    [m.last, m.anonLast, m.fileLast] = await rssKiB(pid);
    m.peak = Math.max(m.peak, m.last);
    m.anonPeak = Math.max(m.anonPeak, m.anonLast);
    await new Promise((r) => setTimeout(r, 250));
  }
  return m;
}

/** Memory with 0, 1,000 and 5,000 peers for one daemon (env: e.g. DENO_V8_FLAGS), with default resync. */
async function rssRun(
  env: Record<string, string>,
): Promise<{ r0: Mem; r1000: Mem; r5000: Mem; passes: number[] }> {
  const c = new DaemonCluster("172.31");
  try {
    await c.init(JSON.stringify({ Network: NETWORK, SubnetLen: 24, Backend: { Type: "vxlan" } }));
    const a = await c.addNode();
    c.start(a, ["--log-level", "debug"], env);
    await c.waitReady(a);
    const pid = a.proc!.pid;
    const heap = async (m: Mem) => {
      const body = (await c.http(a, "/metrics"))[1];
      m.heapUsed = Number(/^flanctl_heap_used_bytes (\d+)/m.exec(body)?.[1] ?? NaN) / 1048576;
      return m;
    };
    const r0 = await heap(await rssOver(pid, 3000));
    let commit = await prepareFakeLeases(c.storeDir, 1000, 1000);
    await commit();
    await waitFor("1000 programmed", async () => (await countRoutes(a.ns)) >= 1000, 60_000);
    const r1000 = await heap(await rssOver(pid, 22_000)); // covers two full passes (--resync-interval 10)
    commit = await prepareFakeLeases(c.storeDir, 2000, 4000);
    await commit();
    await waitFor("5000 programmed", async () => (await countRoutes(a.ns)) >= 5000, 120_000);
    const r5000 = await heap(await rssOver(pid, 22_000));
    const passes = a.log.filter((l) => l.includes("msg=reconciled") && l.includes("peers=5000"))
      .map((l) => Number(/ ms=(\d+)/.exec(l)?.[1] ?? NaN)).filter((x) => !isNaN(x));
    return { r0, r1000, r5000, passes };
  } finally {
    await c.close();
  }
}

/**
 * {@link rssRun} on the etcd store (DAEMON_BENCH_STORE=etcd): etcd runs in the underlay namespace, the
 * leases are written there by bench/etcd_fill.ts, the daemon watches them with --etcd-endpoints.
 */
async function rssRunEtcd(
  env: Record<string, string>,
): Promise<{ r0: Mem; r1000: Mem; r5000: Mem; passes: number[] }> {
  const c = new DaemonCluster("172.31");
  let etcd: Deno.ChildProcess | null = null;
  const url = "http://172.31.0.1:2379";
  const inUnderlay = (cmd: string[]) => nsRun(c.underlay, cmd);
  const fill = async (from: number, n: number) => {
    const r = await inUnderlay([
      Deno.execPath(),
      "run",
      "-A",
      "--no-check",
      `${HERE}etcd_fill.ts`,
      url,
      `${from}`,
      `${n}`,
    ]);
    if (r.code !== 0) throw new Error(`etcd_fill: ${r.stderr}`);
  };
  try {
    await c.init();
    const a = await c.addNode();
    etcd = spawnEtcd(c.underlay, `${c.tmp}/etcd`, url);
    const conf = JSON.stringify({ Network: NETWORK, SubnetLen: 24, Backend: { Type: "vxlan" } });
    await waitFor(
      "etcd up",
      async () =>
        (await inUnderlay(["etcdctl", "--endpoints", url, "put", "/coreos.com/network/config", conf]))
          .code === 0,
      30_000,
    );
    c.start(a, ["--etcd-endpoints", url, "--log-level", "debug"], env);
    await c.waitReady(a);
    const pid = a.proc!.pid;
    const heap = async (m: Mem) => {
      const body = (await c.http(a, "/metrics"))[1];
      m.heapUsed = Number(/^flanctl_heap_used_bytes (\d+)/m.exec(body)?.[1] ?? NaN) / 1048576;
      return m;
    };
    const r0 = await heap(await rssOver(pid, 3000));
    await fill(1000, 1000);
    await waitFor("1000 programmed", async () => (await countRoutes(a.ns)) >= 1000, 60_000);
    const r1000 = await heap(await rssOver(pid, 22_000));
    await fill(2000, 4000);
    await waitFor("5000 programmed", async () => (await countRoutes(a.ns)) >= 5000, 120_000);
    const r5000 = await heap(await rssOver(pid, 22_000));
    const passes = a.log.filter((l) => l.includes("msg=reconciled") && l.includes("peers=5000"))
      .map((l) => Number(/ ms=(\d+)/.exec(l)?.[1] ?? NaN)).filter((x) => !isNaN(x));
    return { r0, r1000, r5000, passes };
  } finally {
    try {
      etcd?.kill("SIGKILL");
      await etcd?.status;
    } catch { /* gone */ }
    await c.close();
  }
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
const mems: [string, Awaited<ReturnType<typeof rssRun>>][] = [];
// DAEMON_BENCH_CONFIGS=1,2 measures memory under those CONFIGS only (indices).
const pick = Deno.env.get("DAEMON_BENCH_CONFIGS")?.split(",").map(Number);
if (only !== "speed") {
  for (const [i, [name, env]] of CONFIGS.entries()) {
    const etcd = Deno.env.get("DAEMON_BENCH_STORE") === "etcd";
    if (!pick || pick.includes(i)) {
      mems.push([`${name}, ${etcd ? "etcd" : "file"} store`, await (etcd ? rssRunEtcd : rssRun)(env)]);
    }
  }
}
const idle = await idleDeno();

const f = (x: number) => x.toFixed(1);
const mib = (k: number) => (k / 1024).toFixed(1);
console.log("daemon benchmark (vxlan, file store, one node in a netns)");
for (const [name, { conv, refTriplet, burst1000, refBatch, burst4000 }] of speeds) {
  console.log(`speed (${name}):`);
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
console.log(
  `reference: idle \`deno run\` of an empty script: RSS ${mib(idle[0])} MiB = private ${mib(idle[1])} + ` +
    `file-backed ${mib(idle[2])} MiB`,
);
for (const [name, r] of mems) {
  const at = (m: Mem) =>
    `RSS peak ${mib(m.peak)} / last ${mib(m.last)} MiB (private ${mib(m.anonPeak)} / ${mib(m.anonLast)}, ` +
    `file-backed ${mib(m.fileLast)}, JS heap used ${f(m.heapUsed)})`;
  console.log(`daemon memory (${name}):`);
  console.log(`  0 peers: ${at(r.r0)}; ${(r.r0.last / idle[0]).toFixed(2)}x the idle deno RSS`);
  console.log(`  1,000 peers: ${at(r.r1000)}; ${(r.r1000.peak / r.r0.last).toFixed(2)}x the 0-peer RSS`);
  console.log(`  5,000 peers: ${at(r.r5000)}; ${(r.r5000.peak / r.r0.last).toFixed(2)}x the 0-peer RSS`);
  console.log(
    `  goal ≤ 64 MiB at 5,000: VmRSS ${r.r5000.peak / 1024 <= 64 ? "met" : "MISSED"}, private memory ` +
      `${r.r5000.anonPeak / 1024 <= 64 ? "met" : "MISSED"} (file-backed pages: the Deno binary's code, ` +
      `shared with every other Deno process)`,
  );
  const pass = r.passes.length ? `median ${pct(r.passes, 50)} ms over ${r.passes.length}` : "n/a";
  console.log(`  full reconcile pass at 5,000 peers: ${pass}`);
}
