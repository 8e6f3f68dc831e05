/**
 * flanctl beside the real flanneld (v0.28.10, built by `install.sh --dev`; skipped with a note when absent),
 * each on one node in throwaway namespaces over one etcd (vxlan, Network 10.0.0.0/8, leases written by
 * bench/etcd_fill.ts): the daemon started with N leases in place (1,000 and 5,000) → all N routes programmed
 * (first programming, start-up included); then 1,000 leases added at once → programmed; RSS (VmRSS) 5 s
 * after that, and CPU (utime + stime) used from start to the end of the bulk add. flanctl runs as installed
 * (the launcher's bundle, flags and V8 flags). Interleaved rounds (FLANNELD_BENCH_ROUNDS, default 3), medians,
 * ratio flanctl / flanneld (< 1: flanctl better). FLANNELD_BENCH_SIZES picks the Ns (default 1000,5000);
 * FLANNELD_BENCH_IDLE_S=40 then samples RSS every second for 40 s more (median and highest: full passes run
 * every 10 s) and the CPU of that window.
 *
 *   deno task bench daemon_flanneld
 * @module
 */
import { spawnEtcd, waitFor } from "../tests/daemon_fixture.ts";
import { MixedCluster } from "../tests/peers_fixture.ts";
import { nsRun, sh } from "../tests/netns.ts";
import { installDaemonInto, installedDaemonCmd, launcherSettings } from "../tests/installed_daemon.ts";
import { findPeer } from "../tests/peers.ts";
import { countRoutes, cpuSeconds, procMemory } from "./daemon_probe.ts";

const HERE = new URL(".", import.meta.url).pathname;
const CONF = JSON.stringify({ Network: "10.0.0.0/8", SubnetLen: 24, Backend: { Type: "vxlan" } });

interface Result {
  first: number;
  bulk: number;
  rss: number;
  cpu: number;
  /** With FLANNELD_BENCH_IDLE_S: RSS sampled every second over that window (median, highest), its CPU. */
  idleRss: number;
  idleMax: number;
  idleCpu: number;
}

/** Seconds of idle time after the "RSS after" reading, sampled (0: none). */
const IDLE_S = Number(Deno.env.get("FLANNELD_BENCH_IDLE_S") ?? 0);

async function runOne(daemon: "flanctl" | "flanneld", n: number, js: string): Promise<Result> {
  const c = new MixedCluster("172.31");
  let etcd: Deno.ChildProcess | null = null;
  const url = "http://172.31.0.1:2379";
  try {
    await c.init();
    const a = await c.addNode();
    etcd = spawnEtcd(c.underlay, `${c.tmp}/etcd`, url, { extra: ["--quota-backend-bytes=4294967296"] });
    await waitFor(
      "etcd up",
      async () =>
        (await nsRun(c.underlay, ["etcdctl", "--endpoints", url, "put", "/coreos.com/network/config", CONF]))
          .code === 0,
      30_000,
    );
    const fill = async (from: number, k: number) => {
      const r = await nsRun(c.underlay, [
        ...[Deno.execPath(), "run", "-A", "--no-check", `${HERE}etcd_fill.ts`, url, `${from}`, `${k}`],
      ]);
      if (r.code !== 0) throw new Error(`etcd_fill: ${r.stderr}`);
    };
    await fill(1000, n);
    const t0 = performance.now();
    if (daemon === "flanctl") {
      const l = launcherSettings();
      c.start(a, ["--etcd-endpoints", url], { ...l.env, FLANCTL_LIBDIR: js.slice(0, js.lastIndexOf("/")) }, [
        ...installedDaemonCmd(js),
      ]);
    } else {
      c.etcdUrl = url;
      c.startFlanneld(a);
    }
    const pid = a.proc!.pid;
    await waitFor(
      `${daemon}: ${n} programmed\n${a.log.slice(-5).join("\n")}`,
      async () => (await countRoutes(a.ns)) >= n,
      300_000,
    );
    const first = (performance.now() - t0) / 1000;
    const t1 = performance.now();
    await fill(1000 + n, 1000);
    await waitFor(
      `${daemon}: ${n + 1000} programmed`,
      async () => (await countRoutes(a.ns)) >= n + 1000,
      300_000,
    );
    const bulk = (performance.now() - t1) / 1000;
    const cpu = cpuSeconds(pid);
    await new Promise((r) => setTimeout(r, 5000));
    const rss = procMemory(pid).rss;
    const idle: number[] = [];
    const cpu0 = cpuSeconds(pid);
    for (let i = 0; i < IDLE_S; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      idle.push(procMemory(pid).rss);
    }
    const idleCpu = cpuSeconds(pid) - cpu0;
    return { first, bulk, rss, cpu, idleRss: median(idle), idleMax: Math.max(...idle), idleCpu };
  } finally {
    try {
      etcd?.kill("SIGKILL");
      await etcd?.status;
    } catch { /* gone */ }
    await c.close();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

if (!findPeer("flanneld")) {
  console.log("flanneld is not built (./install.sh --dev): the side-by-side daemon bench is skipped");
  Deno.exit(0);
}
// flanctl as install.sh's launcher runs it: the daemon bundle in a temp dir.
const dir = await Deno.makeTempDir({ prefix: "flanctl-flanneld-bench-" });
try {
  const { js } = await installDaemonInto(dir);
  const rounds = Number(Deno.env.get("FLANNELD_BENCH_ROUNDS") ?? 3);
  const sizes = (Deno.env.get("FLANNELD_BENCH_SIZES") ?? "1000,5000").split(",").map(Number);
  const res = new Map<string, Result[]>();
  for (let r = 0; r < rounds; r++) {
    for (const n of sizes) {
      for (const d of ["flanctl", "flanneld"] as const) {
        const x = await runOne(d, n, js);
        res.set(`${d} ${n}`, [...(res.get(`${d} ${n}`) ?? []), x]);
        console.log(
          `round ${r + 1} ${d} N=${n}: first ${x.first.toFixed(2)} s, +1000 ${x.bulk.toFixed(2)} s, ` +
            `RSS ${x.rss.toFixed(1)} MiB, CPU ${x.cpu.toFixed(2)} s` + (IDLE_S
              ? `; the next ${IDLE_S} s: RSS median ${x.idleRss.toFixed(1)}, highest ${
                x.idleMax.toFixed(1)
              } MiB, CPU ${x.idleCpu.toFixed(2)} s`
              : ""),
        );
      }
    }
  }
  console.log(
    `\nmedians of ${rounds} interleaved rounds (flanctl as installed vs flanneld v0.28.10, etcd, vxlan):`,
  );
  console.log("N      metric                      flanctl   flanneld   ratio");
  for (const n of sizes) {
    const a = res.get(`flanctl ${n}`)!, b = res.get(`flanneld ${n}`)!;
    for (
      const [k, name, unit] of [
        ["first", `first programming of ${n}`, "s"],
        ["bulk", "1000 added at once", "s"],
        ["rss", "RSS after", "MiB"],
        ["cpu", "CPU start → bulk done", "s"],
        ...(IDLE_S
          ? [
            ["idleRss", `RSS median, next ${IDLE_S} s`, "MiB"],
            ["idleMax", `RSS highest, next ${IDLE_S} s`, "MiB"],
            ["idleCpu", `CPU, next ${IDLE_S} s`, "s"],
          ] as const
          : []),
      ] as const
    ) {
      const x = median(a.map((r) => r[k])), y = median(b.map((r) => r[k]));
      console.log(
        `${String(n).padEnd(6)} ${name.padEnd(27)} ${x.toFixed(2).padStart(7)} ${unit.padEnd(3)} ${
          y.toFixed(2).padStart(7)
        } ${unit.padEnd(3)} ${y > 0 ? `${(x / y).toFixed(2)}x` : "-"}`,
      );
    }
  }
} finally {
  await sh("rm", "-rf", dir);
}
