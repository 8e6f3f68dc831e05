/**
 * Lab scale: `lab up` of N nodes (vxlan, file store, 1 pod per node) for each N of BENCH_LAB_SIZES (default
 * "10,50,100"): time to up (and where it goes: underlay + node namespaces, daemon start, readiness, pods),
 * time until every daemon reports every peer, daemon RSS (mean, max) and CPU, the full pair ping matrix
 * (lab check), then the time for every daemon to converge after one node is added and after one is removed
 * (its daemon stopped, its lease revoked), and `lab down`. Printed against the issue's goal for 100 nodes
 * (up + converged <= 60 s, every pair ok, <= 40 MiB per daemon).
 *
 * A size whose neighbour entries do not fit the host's gc_thresh (host-wide) is refused up front, as
 * `lab up` does; BENCH_LAB_TUNE_HOST=1 runs it with `--tune-host` (lab down restores the thresholds).
 * BENCH_LAB_FLANCTL=PATH builds the labs with that flanctl (an install's launcher: its daemons run the
 * bundle with the installed V8 flags, its CNI plugins the CNI bundle), else with this checkout's main.ts.
 * Lab names start with FLANCTL_TEST_PREFIX. Run: `deno task bench lab`.
 * @module
 */
import {
  connectivityCheck,
  hostFits,
  type LabState,
  loadState,
  refusal,
  stopDaemon,
  waitConverged,
} from "../lib/lab/mod.ts";
import { flanctlCommand, inNs, mustRun } from "../lib/lab/proc.ts";
import { TEST_PREFIX } from "../tests/netns.ts";
import { gcPath, hostThresholds } from "../lib/observe/neigh_gc.ts";

/** The flanctl that builds the labs: BENCH_LAB_FLANCTL (e.g. an install's launcher), else this checkout. */
const CLI = Deno.env.get("BENCH_LAB_FLANCTL") ? [Deno.env.get("BENCH_LAB_FLANCTL")!] : flanctlCommand();

/** Runs flanctl with `args`, handing each stdout line to `onLine` as it arrives; throws on failure. */
async function cli(args: string[], onLine: (l: string) => void = () => {}): Promise<void> {
  const p = new Deno.Command(CLI[0], { args: [...CLI.slice(1), ...args], stdout: "piped", stderr: "piped" })
    .spawn();
  const err = new Response(p.stderr).text();
  let buf = "";
  for await (const chunk of p.stdout.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      onLine(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  }
  const st = await p.status;
  if (!st.success) throw new Error(`flanctl ${args.join(" ")} exited ${st.code}: ${(await err).trim()}`);
}

const sizes = (Deno.env.get("BENCH_LAB_SIZES") ?? "10,50,100").split(",").map((x) => Number(x.trim()))
  .filter((n) => Number.isInteger(n) && n > 1);
const tune = Deno.env.get("BENCH_LAB_TUNE_HOST") === "1";
const GOAL = { nodes: 100, upConvergedS: 60, rssMiB: 40 };

/** Busy and total jiffies of the host (/proc/stat). */
function cpuTimes(): { busy: number; total: number } {
  const f = Deno.readTextFileSync("/proc/stat").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3] + f[4];
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/** RSS (MiB) and CPU seconds (utime + stime) of a process, or null when it is gone. */
function procUsage(pid: number): { rss: number; cpu: number } | null {
  try {
    const st = Deno.readTextFileSync(`/proc/${pid}/status`);
    const rss = Number(/^VmRSS:\s+(\d+)/m.exec(st)![1]) / 1024;
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { rss, cpu: (Number(f[11]) + Number(f[12])) / 100 };
  } catch {
    return null;
  }
}

const secs = (ms: number) => (ms / 1000).toFixed(1);

/** CPU seconds of this process's waited-for children (cutime + cstime): flanctl commands, not daemons. */
function childCpu(): number {
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[13]) + Number(f[14])) / 100;
}

interface Row {
  nodes: number;
  upS: number;
  /** CPU seconds `lab up` and its commands used (daemons not included). */
  upCpu: number;
  phases: string;
  convergedS: number;
  rssMean: number;
  rssMax: number;
  cpuMean: number;
  hostCpu: number;
  pairs: string;
  pingS: number;
  addS: number;
  removeS: number;
  downS: number;
}

async function one(n: number): Promise<Row | string> {
  const load = { nodes: n, podsPerNode: 1, backend: "vxlan" as const, etcd: false };
  const fits = hostFits(load, [4]);
  if (!tune && fits.some((f) => !f.fits)) return refusal(`${n} nodes`, fits);
  const name = `${TEST_PREFIX}lb${n}`.slice(0, 12);
  const marks: [string, number][] = [];
  const t0 = Date.now();
  const cpu0 = cpuTimes();
  const child0 = childCpu();
  const progress = (l: string) => {
    const at = Date.now() - t0;
    if (/^lab .*: underlay/.test(l)) marks.push(["underlay", at]);
    else if (l.startsWith("network config")) marks.push(["nodes", at]);
    else if (l.startsWith("daemons started")) marks.push(["daemons", at]);
    else if (/daemon ready/.test(l) && !marks.some((m) => m[0] === "first ready")) {
      marks.push(["first ready", at]);
    } else if (l.startsWith("--tune-host") || l.startsWith("note:")) console.log(`  ${l}`);
  };
  let s: LabState | null = null;
  let made = false;
  try {
    made = true;
    await cli([
      "lab",
      "up",
      "--name",
      name,
      "--nodes",
      String(n),
      "--pods-per-node",
      "1",
      "--no-check",
      ...(tune ? ["--tune-host"] : []),
    ], progress);
    s = loadState(name);
    const upMs = Date.now() - t0;
    const upCpu = childCpu() - child0;
    marks.push(["rest ready + pods", upMs]);
    const conv = await waitConverged(s, 120_000);
    const convergedMs = Date.now() - t0;
    const cpu1 = cpuTimes();
    if (!conv.ok) console.log(`  ${n} nodes: not converged: ${JSON.stringify(conv.lagging.slice(0, 5))}`);
    const use = s.nodes.map((x) => procUsage(x.daemonPid!)).filter((u) => u !== null);
    const check = await connectivityCheck(s, { parallel: 16 });
    const ok = check.results.filter((r) => r.ok).length;
    for (const r of check.results.filter((r) => !r.ok).slice(0, 5)) {
      console.log(`  ${r.from} -> ${r.to}: ${r.reason}`);
    }
    // One node added: every daemon (the new one too) has every peer.
    const ta = Date.now();
    await cli(["lab", "add-node", "--name", name, "--pods", "1"]);
    s = loadState(name);
    const added = await waitConverged(s, 120_000);
    const addMs = Date.now() - ta;
    if (!added.ok) console.log(`  add-node: not converged: ${JSON.stringify(added.lagging.slice(0, 5))}`);
    // One node removed: its daemon stops, its lease is revoked; the others drop it.
    const gone = s.nodes[s.nodes.length - 1];
    const tr = Date.now();
    await stopDaemon(s, gone);
    const sub =
      /^FLANNEL_SUBNET=(\S+)$/m.exec(Deno.readTextFileSync(`${gone.dir}/run/flannel/subnet.env`))![1];
    const subnet = sub.replace(/\.\d+\/24$/, ".0/24");
    await mustRun(inNs(s.underlay.netns, [...CLI, "lease", "revoke", subnet, ...s.storeFlags]));
    const rest = s.nodes.filter((x) => x !== gone);
    const removed = await waitConverged(s, 120_000, undefined, rest, rest.length - 1);
    const removeMs = Date.now() - tr;
    if (!removed.ok) console.log(`  remove: not converged: ${JSON.stringify(removed.lagging.slice(0, 5))}`);
    const td = Date.now();
    await cli(["lab", "down", "--name", name]);
    made = false;
    const downMs = Date.now() - td;
    let prev = 0;
    const phases = marks.map(([k, at]) => {
      const d = at - prev;
      prev = at;
      return `${k} ${secs(d)}`;
    }).join(", ");
    return {
      nodes: n,
      upS: upMs / 1000,
      upCpu,
      phases,
      convergedS: convergedMs / 1000,
      rssMean: use.reduce((a, u) => a + u.rss, 0) / use.length,
      rssMax: Math.max(...use.map((u) => u.rss)),
      cpuMean: use.reduce((a, u) => a + u.cpu, 0) / use.length,
      hostCpu: (100 * (cpu1.busy - cpu0.busy)) / (cpu1.total - cpu0.total),
      pairs: `${ok}/${check.results.length}`,
      pingS: check.pingMs / 1000,
      addS: addMs / 1000,
      removeS: removeMs / 1000,
      downS: downMs / 1000,
    };
  } finally {
    if (made) {
      await cli(["lab", "down", "--name", name]).catch((e) => console.log(`  lab down: ${e.message}`));
    }
  }
}

console.log(
  `lab bench: vxlan, file store, 1 pod per node; ${navigator.hardwareConcurrency} CPUs; sizes ${
    sizes.join(", ")
  }` +
    (tune ? "; --tune-host" : ""),
);
const rows: Row[] = [];
for (const n of sizes) {
  const before = hostThresholds(4);
  const r = await one(n);
  // --tune-host's lab down restores the thresholds unless the labs still up need them; this bench made the
  // change, so it puts them back itself if they are still raised (and says so).
  const after = hostThresholds(4);
  if (tune && before && after && JSON.stringify(before) !== JSON.stringify(after)) {
    console.log(
      `  thresholds still ${JSON.stringify(after)} after lab down: restoring ${JSON.stringify(before)}`,
    );
    for (const w of [1, 2, 3] as const) Deno.writeTextFileSync(gcPath(4, w), `${before[`gcThresh${w}`]}\n`);
  }
  if (typeof r === "string") {
    console.log(`\n${n} nodes: REFUSED up front (BENCH_LAB_TUNE_HOST=1 runs it with --tune-host):\n${r}`);
    continue;
  }
  rows.push(r);
  console.log(`\n${n} nodes: up ${r.upS.toFixed(1)} s (${r.phases})`);
}
if (rows.length) {
  const head = [
    "nodes",
    "up s",
    "up CPU s",
    "converged s",
    "RSS mean/max MiB",
    "daemon CPU s mean",
    "host CPU %",
    "pairs ok",
    "ping s",
    "+1 node s",
    "-1 node s",
    "down s",
  ];
  const body = rows.map((r) => [
    String(r.nodes),
    r.upS.toFixed(1),
    r.upCpu.toFixed(1),
    r.convergedS.toFixed(1),
    `${r.rssMean.toFixed(1)}/${r.rssMax.toFixed(1)}`,
    r.cpuMean.toFixed(2),
    r.hostCpu.toFixed(0),
    r.pairs,
    r.pingS.toFixed(1),
    r.addS.toFixed(1),
    r.removeS.toFixed(1),
    r.downS.toFixed(1),
  ]);
  const w = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  console.log("\n" + head.map((h, i) => h.padStart(w[i])).join("  "));
  for (const b of body) console.log(b.map((c, i) => c.padStart(w[i])).join("  "));
  const g = rows.find((r) => r.nodes === GOAL.nodes);
  console.log(
    `\ngoal (${GOAL.nodes} nodes): up + converged <= ${GOAL.upConvergedS} s, every pair ok, <= ${GOAL.rssMiB} MiB ` +
      "per daemon" +
      (g
        ? `: ${g.convergedS.toFixed(1)} s (ratio ${
          (g.convergedS / GOAL.upConvergedS).toFixed(2)
        }), ${g.pairs}, ` +
          `max ${g.rssMax.toFixed(1)} MiB (ratio ${(g.rssMax / GOAL.rssMiB).toFixed(2)})`
        : ": not measured in this run"),
  );
}
