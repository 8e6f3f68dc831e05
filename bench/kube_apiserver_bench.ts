/**
 * Kube mode against the REAL kube-apiserver (v1.37.2, built by `install.sh --dev`; skipped with a note when
 * absent): etcd + kube-apiserver (tests/kube_cluster.ts) in the bench's underlay namespace, the manifest's RBAC
 * (deploy/kube-flanctl.yml), N realistic Nodes (~10 KB each: labels, other components' and flannel's
 * annotations, images, conditions; default 5000, KUBE_BENCH_NODES) created through the API as the admin, and
 * one node namespace whose daemon (node `self`) authenticates as the manifest's ServiceAccount. Per daemon
 * run, flanctl (as installed: the launcher's bundle, flags and V8 flags) and flanneld v0.28.10
 * (`--kube-subnet-mgr`, when built) in interleaved rounds (KUBE_BENCH_ROUNDS, default 3; medians):
 *
 * - start: the daemon started → all N peer routes programmed → 5 s settle. Requests it made (the API server's
 *   audit log, Metadata level, counted by auditID for the ServiceAccount's user: every request that reached
 *   the server, by verb), bytes both ways on its connections (a counting TCP proxy in the namespace between
 *   the daemon and the server: TLS included, watch events included), peak RSS (VmHWM) and RSS after settle
 *   (VmRSS), CPU (utime + stime) to the end of the settle.
 * - re-list: the API server restarted (same etcd): watches break and resume against a fresh watch cache whose
 *   start is newer than the daemon's resourceVersion (410 Gone → re-list), until the daemon watches again
 *   after its list + 5 s. Requests, bytes, VmHWM and VmRSS as above (peaks over the whole run).
 *
 * KUBE_BENCH_TRACE=1: flanctl runs with --log-level=debug, and each round prints the daemon's RSS from the
 * API server's restart on (`seconds:MiB`, sampled every 10 ms, a point per change of 1 MiB or more) and its
 * first log lines of that phase: where in a re-list a peak comes from.
 *
 *   deno task bench kube_apiserver
 * @module
 */
import { waitFor } from "../tests/daemon_fixture.ts";
import { MixedCluster } from "../tests/peers_fixture.ts";
import { nsRun, ROOT, sh } from "../tests/netns.ts";
import { installDaemonInto, installedDaemonCmd, launcherSettings } from "../tests/installed_daemon.ts";
import { findPeer } from "../tests/peers.ts";
import { KubeControlPlane } from "../tests/kube_cluster.ts";
import { countRoutes, cpuSeconds, procMemory } from "./daemon_probe.ts";

const HERE = new URL(".", import.meta.url).pathname;
const N = Number(Deno.env.get("KUBE_BENCH_NODES") ?? 5000);
const ROUNDS = Number(Deno.env.get("KUBE_BENCH_ROUNDS") ?? 3);
const SETTLE_MS = 5000;
const TRACE = Deno.env.get("KUBE_BENCH_TRACE") === "1";
const SA_USER = "system:serviceaccount:kube-flannel:flannel";
// Not 10.0.0.0/8: the Nodes' public IPs (10.200.x.y) must lie outside the pod network (flanctl rejects those).
const CONF = JSON.stringify({ Network: "10.0.0.0/9", Backend: { Type: "vxlan" } });
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`;

if (!findPeer("kube-apiserver") || !findPeer("kubectl")) {
  console.log("kube-apiserver is not built (./install.sh --dev): the real API server bench is skipped");
  Deno.exit(0);
}
const haveFlanneld = !!findPeer("flanneld");

interface Counters {
  /** Requests by verb (new auditIDs of the ServiceAccount's user). */
  verbs: Record<string, number>;
  up: number;
  down: number;
}
interface Phase extends Counters {
  requests: number;
  hwm: number;
  rss: number;
}
interface Result {
  first: number;
  cpu: number;
  start: Phase;
  relist: Phase;
}

/** Reads the audit log's new lines since the last call: auditIDs first seen, by verb, for the SA's user. */
class AuditCounter {
  #off = 0;
  #seen = new Set<string>();
  agents = new Set<string>();
  constructor(readonly path: string) {}
  /** Counts by verb; `order` gets the verbs in the log's order. */
  read(order: string[] = []): Record<string, number> {
    const out: Record<string, number> = {};
    let data: Uint8Array;
    try {
      data = Deno.readFileSync(this.path);
    } catch {
      return out;
    }
    if (data.length < this.#off) this.#off = 0;
    const text = new TextDecoder().decode(data.subarray(this.#off));
    const end = text.lastIndexOf("\n") + 1;
    this.#off += new TextEncoder().encode(text.slice(0, end)).length;
    for (const line of text.slice(0, end).split("\n")) {
      if (!line) continue;
      const e = JSON.parse(line) as {
        auditID: string;
        verb: string;
        user?: { username?: string };
        userAgent?: string;
      };
      if (e.user?.username !== SA_USER || this.#seen.has(e.auditID)) continue;
      this.#seen.add(e.auditID);
      if (e.userAgent) this.agents.add(e.userAgent);
      out[e.verb] = (out[e.verb] ?? 0) + 1;
      order.push(e.verb);
    }
    return out;
  }
}

/** The daemon's memory (MiB) and CPU used so far (s). */
const proc = (pid: number) => ({ ...procMemory(pid), cpu: cpuSeconds(pid) });

/** The daemon's RSS sampled every 10 ms until stopped: `seconds:MiB` at each change of 1 MiB or more. */
class RssTrace {
  #on = true;
  #points: string[] = [];
  #done: Promise<void>;
  constructor(pid: number) {
    const t0 = performance.now();
    this.#done = (async () => {
      let last = 0;
      while (this.#on) {
        let v = 0;
        try {
          v = procMemory(pid).rss;
        } catch { /* gone */ }
        if (Math.abs(v - last) >= 1) {
          this.#points.push(`${((performance.now() - t0) / 1000).toFixed(2)}:${v.toFixed(0)}`);
          last = v;
        }
        await sleep(10);
      }
    })();
  }
  async stop(): Promise<string[]> {
    this.#on = false;
    await this.#done;
    return this.#points;
  }
}

const sum = (v: Record<string, number>) => Object.values(v).reduce((a, b) => a + b, 0);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const c = new MixedCluster("172.29");
let cp: KubeControlPlane | null = null;
let proxy: Deno.ChildProcess | null = null;
const jsDir = await Deno.makeTempDir({ prefix: "flanctl-kube-apiserver-bench-" });
const res = new Map<string, Result[]>();
try {
  const { js } = await installDaemonInto(jsDir);
  await c.init();
  const a = await c.addNode();
  const addr = `${c.base}.0.1`;
  await Deno.writeTextFile(`${c.tmp}/audit-policy.yaml`, AUDIT_POLICY);
  const auditLog = `${c.tmp}/audit.log`;
  cp = await KubeControlPlane.start({
    netns: c.underlay,
    address: addr,
    dir: `${c.tmp}/kube`,
    apiserverArgs: [`--audit-policy-file=${c.tmp}/audit-policy.yaml`, `--audit-log-path=${auditLog}`],
  });
  await cp.kubectlOk("apply", "-f", `${ROOT}deploy/kube-flanctl.yml`);
  await cp.upsertNode("self", ["10.100.0.0/24"]);
  const t = performance.now();
  const f = cp.files;
  const fill = await nsRun(c.underlay, [
    ...[
      Deno.execPath(),
      "run",
      "-A",
      "--no-check",
      `${HERE}kube_fill.ts`,
      cp.url,
      f.ca,
      f.adminCert,
      f.adminKey,
    ],
    ...["0", String(N), "24"],
  ]);
  if (fill.code !== 0) throw new Error(`kube_fill: ${fill.stderr}`);
  const stored = JSON.parse(await cp.kubectlOk("get", "--raw", "/api/v1/nodes?limit=1")).metadata;
  console.log(
    `${N} realistic Nodes created through the API in ${((performance.now() - t) / 1000).toFixed(1)} s ` +
      `(remaining after the first page: ${stored.remainingItemCount})`,
  );
  const sizes = JSON.parse(await cp.kubectlOk("get", "--raw", "/api/v1/nodes/node-00001"));
  console.log(`one Node as the API server returns it: ${JSON.stringify(sizes).length} bytes of JSON`);
  // The daemon's kubeconfig: the manifest's ServiceAccount, through the counting proxy.
  await cp.kubectlOk("create", "secret", "generic", "bench", "-n", "kube-flannel");
  await Deno.writeTextFile(`${c.tmp}/token`, await cp.token("kube-flannel", "flannel", "bench"));
  const kc = `${c.tmp}/sa.kubeconfig`;
  await Deno.writeTextFile(
    kc,
    cp.kubeconfig({ tokenFile: `${c.tmp}/token` }).replace(cp.url, `https://${addr}:7443`),
  );
  await Deno.writeTextFile(`${c.tmp}/net-conf.json`, CONF);
  const stats = `${c.tmp}/proxy.json`;
  proxy = new Deno.Command("ip", {
    args: [
      ...[
        "netns",
        "exec",
        c.underlay,
        Deno.execPath(),
        "run",
        "-A",
        "--no-check",
        `${HERE}tcp_count_proxy.ts`,
      ],
      ...[`${addr}:7443`, `${addr}:6443`, stats],
    ],
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  await waitFor("proxy up", () => Deno.stat(stats).then(() => true, () => false), 30_000);
  const audit = new AuditCounter(auditLog);
  const counters = async (): Promise<Counters> => {
    await sleep(300); // the proxy's stats file is rewritten every 100 ms
    const s = JSON.parse(await Deno.readTextFile(stats));
    return { verbs: audit.read(), up: s.up, down: s.down };
  };
  const kubeArgs = [
    "--kube-subnet-mgr",
    `--kubeconfig-file=${kc}`,
    `--net-config-path=${c.tmp}/net-conf.json`,
  ];

  const runOne = async (d: "flanctl" | "flanneld"): Promise<Result> => {
    await nsRun(a.ns, ["ip", "link", "del", "flannel.1"]);
    const before = await counters();
    const t0 = performance.now();
    if (d === "flanctl") {
      const l = launcherSettings();
      c.start(
        a,
        TRACE ? [...kubeArgs, "--log-level=debug"] : kubeArgs,
        { ...l.env, FLANCTL_LIBDIR: jsDir, NODE_NAME: "self" },
        installedDaemonCmd(js),
      );
    } else {
      c.startFlanneld(a, kubeArgs, { NODE_NAME: "self" });
    }
    const pid = a.proc!.pid;
    try {
      await waitFor(
        () => `${d}: ${N} routes programmed\n${a.log.slice(-5).join("\n")}`,
        async () => (await countRoutes(a.ns)) >= N,
        300_000,
      );
      const first = (performance.now() - t0) / 1000;
      await sleep(SETTLE_MS);
      const s1 = await counters();
      const p1 = proc(pid);
      const phase = (x: Counters, p: { hwm: number; rss: number }): Phase => ({
        ...x,
        requests: sum(x.verbs),
        hwm: p.hwm,
        rss: p.rss,
      });
      const start = phase({ verbs: s1.verbs, up: s1.up - before.up, down: s1.down - before.down }, p1);
      const trace = TRACE ? new RssTrace(pid) : null;
      const logFrom = a.log.length;
      await cp!.restartApiserver();
      const relistVerbs: Record<string, number> = {};
      const order: string[] = [];
      const tr = performance.now();
      // Done when the daemon watches again after a list (the re-list), or, if it never lists, 60 s after
      // it resumed watching.
      await waitFor(
        () => `${d}: watching again after the API server's restart\n${a.log.slice(-5).join("\n")}`,
        () => {
          for (const [k, v] of Object.entries(audit.read(order))) relistVerbs[k] = (relistVerbs[k] ?? 0) + v;
          const l = order.indexOf("list");
          const relisted = l >= 0 && order.indexOf("watch", l) > l;
          return Promise.resolve(
            relisted || (!order.includes("list") && order.includes("watch") &&
              performance.now() - tr > 60_000),
          );
        },
        240_000,
      );
      await sleep(SETTLE_MS);
      if (trace) {
        console.log(`  trace RSS (s:MiB): ${(await trace.stop()).join(" ")}`);
        for (const l of a.log.slice(logFrom).filter((l) => /released|list|410/.test(l))) {
          console.log(`    ${l}`);
        }
      }
      const s2 = await counters();
      for (const [k, v] of Object.entries(s2.verbs)) relistVerbs[k] = (relistVerbs[k] ?? 0) + v;
      const relist = phase({ verbs: relistVerbs, up: s2.up - s1.up, down: s2.down - s1.down }, proc(pid));
      return { first, cpu: p1.cpu, start, relist };
    } finally {
      await c.stop(a);
      await sleep(500);
      audit.read(); // the last requests (e.g. a final status patch) belong to no phase
    }
  };

  const daemons = haveFlanneld ? ["flanctl", "flanneld"] as const : ["flanctl"] as const;
  for (let r = 0; r < ROUNDS; r++) {
    for (const d of daemons) {
      const x = await runOne(d);
      res.set(d, [...(res.get(d) ?? []), x]);
      const v = (p: Phase) =>
        `${p.requests} requests (${Object.entries(p.verbs).map(([k, n]) => `${k} ${n}`).join(", ")}), ${
          (p.down / 1048576).toFixed(1)
        } MiB down, ${(p.up / 1024).toFixed(0)} KiB up, peak RSS ${p.hwm.toFixed(1)} MiB, RSS ${
          p.rss.toFixed(1)
        } MiB`;
      console.log(
        `round ${r + 1} ${d}: first programming ${x.first.toFixed(2)} s, CPU ${x.cpu.toFixed(2)} s\n` +
          `  start:   ${v(x.start)}\n  re-list: ${v(x.relist)}`,
      );
    }
  }
  console.log(`user agents seen: ${[...audit.agents].join(", ")}`);
} finally {
  try {
    proxy?.kill("SIGKILL");
    await proxy?.status;
  } catch { /* gone */ }
  await cp?.stop();
  await c.close();
  await sh("rm", "-rf", jsDir);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const rows: [string, (r: Result) => number, string][] = [
  ["start: requests", (r) => r.start.requests, ""],
  ["start: bytes down", (r) => r.start.down / 1048576, "MiB"],
  ["start: bytes up", (r) => r.start.up / 1024, "KiB"],
  ["start: peak RSS (VmHWM)", (r) => r.start.hwm, "MiB"],
  ["start: RSS after 5 s", (r) => r.start.rss, "MiB"],
  ["start: first programming", (r) => r.first, "s"],
  ["start: CPU", (r) => r.cpu, "s"],
  ["re-list: requests", (r) => r.relist.requests, ""],
  ["re-list: bytes down", (r) => r.relist.down / 1048576, "MiB"],
  ["re-list: bytes up", (r) => r.relist.up / 1024, "KiB"],
  ["re-list: peak RSS (VmHWM)", (r) => r.relist.hwm, "MiB"],
  ["re-list: RSS after 5 s", (r) => r.relist.rss, "MiB"],
];
const a = res.get("flanctl") ?? [], b = res.get("flanneld") ?? [];
console.log(
  `\nmedians of ${a.length} interleaved rounds, ${N} realistic Nodes, real kube-apiserver v1.37.2 ` +
    `(flanctl as installed${b.length ? " vs flanneld v0.28.10" : "; flanneld not built"}):`,
);
console.log(`metric                        flanctl       ${b.length ? "flanneld      ratio" : ""}`);
for (const [name, f, unit] of rows) {
  const x = median(a.map(f));
  const dec = unit === "" ? 0 : 2;
  let line = `${name.padEnd(29)} ${x.toFixed(dec).padStart(8)} ${unit.padEnd(4)}`;
  if (b.length) {
    const y = median(b.map(f));
    line += ` ${y.toFixed(dec).padStart(8)} ${unit.padEnd(4)} ${(x / y).toFixed(2)}x`;
  }
  console.log(line);
}
const worst = Math.max(...a.map((r) => Math.max(r.start.hwm, r.relist.hwm)));
const steady = Math.max(median(a.map((r) => r.start.rss)), median(a.map((r) => r.relist.rss)));
const reqOk = !b.length ||
  (median(a.map((r) => r.start.requests)) <= median(b.map((r) => r.start.requests)) &&
    median(a.map((r) => r.relist.requests)) <= median(b.map((r) => r.relist.requests)));
console.log(
  `goal: requests <= flanneld's: ${b.length ? (reqOk ? "met" : "NOT met") : "no flanneld"}; ` +
    `RSS <= 64 MiB: steady (median) ${steady.toFixed(1)} MiB ${steady <= 64 ? "met" : "NOT met"}, ` +
    `peak (highest of any run) ${worst.toFixed(1)} MiB ${worst <= 64 ? "met" : "NOT met"}`,
);
