/**
 * Kube-mode daemon memory: `flanctl daemon --kube-subnet-mgr` (vxlan) against the fake API server (inside
 * the bench's underlay namespace) holding 5000 peer Nodes, measured once the daemon is ready and all 5000
 * peer routes are programmed: RSS, private and shared memory from /proc/<pid>/smaps_rollup and the peak RSS
 * (VmHWM). Realistic ~10 KB Nodes (labels, images, conditions, addresses) against the reference of the same
 * daemon with 5000 small Nodes (only the fields the store reads), median of 3 interleaved runs. With
 * `KUBE_RSS_REF=<rev>` that revision's daemon with the realistic Nodes is measured too (e.g. `main`, the
 * before), from source and as installed (its cli/daemon_entry.ts bundled, run with its install.sh's
 * launcher flags). Every daemon runs as the installed service does (deploy/flanctl.service):
 * `DENO_V8_FLAGS=--max-semi-space-size=1`; `KUBE_RSS_V8_FLAGS` overrides it ("" for plain `deno run`).
 * The same two Node sets are also measured "as installed": cli/daemon_entry.ts bundled as install.sh does
 * (daemon.js) and run with the launcher's `deno run` flags and V8 flags (install.sh's DAEMON_DENO_FLAGS /
 * DAEMON_V8_FLAGS lines), which is what the goal is about. KUBE_RSS_VERBOSE=1 prints each sample and the
 * daemons' debug log; KUBE_RSS_SETTLE_MS (default 8000) is the time from all routes programmed to the sample.
 * @module
 */
import { DaemonCluster, waitFor } from "../tests/daemon_fixture.ts";
import { nsRun, ROOT } from "../tests/netns.ts";
import { FakeApiServer, kubeconfigYaml, type Node } from "../tests/kube_fake_api.ts";
import { realisticNode } from "../tests/kube_nodes_fixture.ts";
import { projectNode } from "../lib/store/kube/kube_node.ts";
import {
  bundleDaemon,
  installDaemonInto,
  installedDaemonCmd,
  installSetting,
  type LauncherSettings,
  launcherSettings,
} from "../tests/installed_daemon.ts";

const PEERS = 5000;
/**
 * Time from all routes programmed to the sample: more than the daemon's longest wait before it gives memory
 * back (lib/daemon/memory.ts: TRIM_MAX_WAIT_MS, 5 s, when events keep coming), so the sample is the steady
 * state (3 s sampled some daemons before their release: JS heap used 18-45 MiB instead of 11-13).
 */
const SETTLE_MS = Number(Deno.env.get("KUBE_RSS_SETTLE_MS") ?? 8000);
const P = "flannel.alpha.coreos.com/";
const ref = Deno.env.get("KUBE_RSS_REF");
const v8 = Deno.env.get("KUBE_RSS_V8_FLAGS") ?? "--max-semi-space-size=1";
let refDir = "";
if (ref) {
  refDir = await Deno.makeTempDir({ prefix: "flanctl-kube-rss-ref-" });
  const a = new Deno.Command("sh", {
    args: ["-c", `git -C '${ROOT}' archive '${ref}' | tar -x -C '${refDir}'`],
    stderr: "piped",
  }).outputSync();
  if (!a.success) {
    console.log(`reference ${ref}: git archive failed (${new TextDecoder().decode(a.stderr).trim()})`);
    Deno.exit(1);
  }
}

interface Sample {
  rss: number;
  priv: number;
  shared: number;
  anon: number;
  hwm: number;
  /** JavaScript heap in use (KiB), from the daemon's /metrics. */
  heap: number;
}

function sample(pid: number, heap: number): Sample {
  const t = Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`);
  const g = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(t)![1]);
  const hwm = Number(/^VmHWM:\s+(\d+)/m.exec(Deno.readTextFileSync(`/proc/${pid}/status`))![1]);
  return {
    rss: g("Rss"),
    priv: g("Private_Clean") + g("Private_Dirty"),
    shared: g("Shared_Clean") + g("Shared_Dirty"),
    anon: g("Anonymous"),
    hwm,
    heap,
  };
}

/** The small form of a Node: what the store reads, plus an empty status. */
function small(n: Node): Node {
  return { ...projectNode(n, P), status: { conditions: [] } } as unknown as Node;
}

function fill(api: FakeApiServer, big: boolean) {
  api.nodes.clear();
  for (let i = 0; i < PEERS; i++) {
    const n = realisticNode(i, P, String(++api.rv));
    api.nodes.set(n.metadata.name, big ? n : small(n));
  }
  const self: Node = {
    metadata: { name: "self", resourceVersion: String(++api.rv), annotations: {} },
    spec: { podCIDR: "10.30.0.0/24", podCIDRs: ["10.30.0.0/24"] },
    status: { conditions: [] },
  };
  api.nodes.set("self", self);
}

const bundleDir = await Deno.makeTempDir({ prefix: "flanctl-kube-rss-js-" });
/** The daemon as the launcher runs daemon.js (its arguments have no `daemon` verb). */
const { cmd: installedCmd, v8: installedV8 } = await installDaemonInto(bundleDir);
/** How an installed daemon runs: its FLANCTL_LIBDIR (daemon.js and src/) and V8 flags. */
interface Installed {
  libdir: string;
  v8: string;
}
const installed = new Map<string[], Installed>([[installedCmd, { libdir: bundleDir, v8: installedV8 }]]);
/** KUBE_RSS_REF's daemon as installed: its bundle, its launcher's flags (--max-semi-space-size=1 without). */
let refInstalledCmd: string[] | null = null;
let refInstalledLabel = "";
if (ref) {
  const libdir = `${bundleDir}/ref`;
  await Deno.mkdir(libdir);
  await bundleDaemon(`${libdir}/daemon.js`, `${refDir}/`);
  await Deno.symlink(refDir, `${libdir}/src`);
  let l: LauncherSettings | null = null;
  try {
    l = launcherSettings(`${refDir}/`);
  } catch { /* an older install.sh without the DAEMON_* lines */ }
  const refV8 = l?.v8 ?? "--max-semi-space-size=1";
  refInstalledCmd = installedDaemonCmd(`${libdir}/daemon.js`, { flags: l?.flags ?? [], v8: refV8 });
  refInstalledLabel = `${(l?.flags ?? []).join(" ")} --v8-flags=${refV8}`;
  installed.set(refInstalledCmd, { libdir, v8: refV8 });
}

const c = new DaemonCluster("10.92");
const res: Record<string, Sample[]> = { big: [], small: [], before: [], ibig: [], ismall: [], ibefore: [] };
let api: FakeApiServer | null = null;
try {
  await c.init();
  const n = await c.addNode();
  api = new FakeApiServer({ hostname: "10.92.0.1", netns: c.underlay });
  await Deno.writeTextFile(
    `${c.tmp}/net-conf.json`,
    // The peers' podCIDRs (10.0-19.x.0/24) and ours, not their public IPs (10.200.x.y): a peer whose
    // PublicIP lies inside the Network is refused (lib/reconcile/peer_guard.ts).
    JSON.stringify({ Network: "10.0.0.0/11", Backend: { Type: "vxlan" } }),
  );
  await Deno.writeTextFile(
    `${c.tmp}/kubeconfig`,
    kubeconfigYaml(api.url),
  );
  const args = c.daemonArgs(n, [
    "--kube-subnet-mgr",
    `--kubeconfig-file=${c.tmp}/kubeconfig`,
    `--net-config-path=${c.tmp}/net-conf.json`,
    ...(Deno.env.get("KUBE_RSS_VERBOSE") ? ["--log-level", "debug"] : []),
  ]);
  const fromSource = (
    root: string,
  ) => [Deno.execPath(), "run", "-A", "--no-check", "--quiet", `${root}main.ts`];
  const variants: [string, string[], boolean][] = [
    ["big", fromSource(ROOT), true],
    ["small", fromSource(ROOT), false],
    ["ibig", installedCmd, true],
    ["ismall", installedCmd, false],
  ];
  if (ref) variants.push(["before", fromSource(`${refDir}/`), true], ["ibefore", refInstalledCmd!, true]);
  for (let round = 0; round < 3; round++) {
    for (const [k, cmd, big] of variants) {
      fill(api, big);
      const inst = installed.get(cmd);
      const p = new Deno.Command("ip", {
        args: ["netns", "exec", n.ns, ...cmd, ...(inst ? args.slice(1) : args)],
        env: inst
          ? { NODE_NAME: "self", FLANCTL_LIBDIR: inst.libdir, FLANCTL_DAEMON_V8_FLAGS: inst.v8 }
          : { NODE_NAME: "self", DENO_V8_FLAGS: v8 },
        stdout: "null",
        stderr: Deno.env.get("KUBE_RSS_VERBOSE") ? "inherit" : "null",
      }).spawn();
      try {
        await c.waitReady(n, 120_000);
        await waitFor(`${PEERS} peer routes on flannel.1 (${k})`, async () => {
          const r = await nsRun(n.ns, ["ip", "-4", "route", "show", "dev", "flannel.1"]);
          return r.stdout.trim().split("\n").length >= PEERS;
        }, 120_000);
        await new Promise((r) => setTimeout(r, SETTLE_MS));
        const metrics = (await c.http(n, "/metrics"))[1];
        const heap = Number(/^flanctl_heap_used_bytes (\d+)/m.exec(metrics)?.[1] ?? NaN) / 1024;
        res[k].push(sample(p.pid, heap)); // `ip netns exec` execs deno: same pid
        if (Deno.env.get("KUBE_RSS_VERBOSE")) console.error(k, JSON.stringify(res[k].at(-1)));
      } finally {
        p.kill("SIGTERM");
        await p.status;
      }
    }
  }
} finally {
  await api?.close();
  await c.close();
  if (refDir) await Deno.remove(refDir, { recursive: true });
  await Deno.remove(bundleDir, { recursive: true });
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mib = (k: number) => (k / 1024).toFixed(1);
const m = (x: Sample[]) => ({
  rss: med(x.map((y) => y.rss)),
  priv: med(x.map((y) => y.priv)),
  shared: med(x.map((y) => y.shared)),
  anon: med(x.map((y) => y.anon)),
  hwm: med(x.map((y) => y.hwm)),
  heap: med(x.map((y) => y.heap)),
});
const line = (label: string, s: ReturnType<typeof m>) =>
  console.log(
    `${label.padEnd(34)} RSS ${mib(s.rss)} MiB (private ${mib(s.priv)}, shared ${mib(s.shared)}, anonymous ${
      mib(s.anon)
    }), peak RSS ${mib(s.hwm)} MiB, JS heap used ${mib(s.heap)} MiB`,
  );
const verdict = (b: ReturnType<typeof m>, s: ReturnType<typeof m>) =>
  console.log(
    `  ratio: RSS ${(b.rss / s.rss).toFixed(2)}x, private ${(b.priv / s.priv).toFixed(2)}x, peak ${
      (b.hwm / s.hwm).toFixed(2)
    }x the reference (median of 3); goal RSS <= 64 MiB: ${b.rss <= 64 * 1024 ? "met" : "NOT met"}`,
  );
const [b, s] = [m(res.big), m(res.small)];
console.log(`main.ts from source, DENO_V8_FLAGS=${v8}:`);
line(`reference: ${PEERS} small Nodes`, s);
line(`this: ${PEERS} realistic ~10 KB Nodes`, b);
if (ref) line(`${ref}: ${PEERS} realistic Nodes`, m(res.before));
verdict(b, s);
const [ib, is] = [m(res.ibig), m(res.ismall)];
console.log(
  `as installed (daemon.js, ${installSetting("DAEMON_DENO_FLAGS")} --v8-flags=${installedV8}):`,
);
line(`reference: ${PEERS} small Nodes`, is);
line(`this: ${PEERS} realistic ~10 KB Nodes`, ib);
if (ref) line(`${ref} (${refInstalledLabel}): ${PEERS} realistic Nodes`, m(res.ibefore));
verdict(ib, is);
