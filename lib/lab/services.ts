/**
 * The lab's background services: etcd (Debian's /usr/bin/etcd, in the underlay namespace on the bridge
 * address, data under the lab dir) and one flanctl daemon per node (in the node namespace, with the
 * node's files mounted at the default paths). Each is recorded in the state before it starts.
 * @module
 */
import { httpGet } from "../observe/http_get.ts";
import { FlanctlError } from "../base/errors.ts";
import { withNodeFiles } from "./exec.ts";
import { WIREGUARD_GO_ENV } from "../backend/wireguard/userspace.ts";
import { WIREGUARD_WAY_ENV } from "../backend/wireguard/choose.ts";
import { flanctlCommand, inNs, isOurProcess, runCmd, sleep, spawnDetached, stopProcess } from "./proc.ts";
import { saveState } from "./state.ts";
import type { LabState, NodeState, ProcState } from "./types.ts";

/** Debian's etcd (package etcd-server). */
export const ETCD_BIN = "/usr/bin/etcd";

/** The etcd client port the lab uses. */
export const ETCD_PORT = 2379;

/** The etcd endpoint of a lab (reachable from the underlay and every node namespace). */
export function etcdEndpoint(s: LabState): string {
  return `http://${s.underlay.gateway}:${ETCD_PORT}`;
}

/** A lab service that did not come up; carries the end of its log. */
export class LabServiceError extends FlanctlError {
  constructor(what: string, why: string, log: string) {
    let tail = "";
    try {
      tail = Deno.readTextFileSync(log).trim().split("\n").slice(-8).join("\n  ");
    } catch { /* no log */ }
    super(`${what} ${why}; last lines of ${log}:\n  ${tail || "(empty)"}`, 1);
  }
}

/** Starts (or restarts) a recorded process and stores its new pid. */
async function startProc(s: LabState, p: ProcState): Promise<void> {
  p.pid = await spawnDetached(p.cmd, p.log);
  saveState(s);
}

/** The etcd command of a lab. */
export function etcdCommand(s: LabState): string[] {
  const gw = s.underlay.gateway;
  return inNs(s.underlay.netns, [
    ETCD_BIN,
    "--name",
    s.name,
    "--data-dir",
    `${s.dir}/etcd/data`,
    "--listen-client-urls",
    `http://${gw}:${ETCD_PORT},http://127.0.0.1:${ETCD_PORT}`,
    "--advertise-client-urls",
    `http://${gw}:${ETCD_PORT}`,
    "--listen-peer-urls",
    "http://127.0.0.1:2380",
    "--initial-advertise-peer-urls",
    "http://127.0.0.1:2380",
    "--initial-cluster",
    `${s.name}=http://127.0.0.1:2380`,
  ]);
}

/** True when etcd answers a health check. */
export async function etcdHealthy(s: LabState): Promise<boolean> {
  const r = await runCmd(
    inNs(s.underlay.netns, [
      "etcdctl",
      "--endpoints",
      etcdEndpoint(s),
      "--dial-timeout=1s",
      "endpoint",
      "health",
    ]),
    { env: { ETCDCTL_API: "3" } },
  );
  return r.code === 0;
}

/** Starts the lab's etcd (or restarts the recorded one) and waits until it is healthy. */
export async function startEtcd(s: LabState, signal?: AbortSignal): Promise<void> {
  Deno.mkdirSync(`${s.dir}/etcd`, { recursive: true });
  let p = s.procs.find((x) => x.what === "etcd");
  if (!p) {
    p = { pid: 0, what: "etcd", cmd: etcdCommand(s), netns: s.underlay.netns, log: `${s.dir}/etcd/etcd.log` };
    s.procs.push(p);
    saveState(s);
  }
  await startProc(s, p);
  const end = Date.now() + 30_000;
  while (!(await etcdHealthy(s))) {
    signal?.throwIfAborted();
    if (!isOurProcess(p.pid, `${s.dir}/`)) throw new LabServiceError("etcd", "exited", p.log);
    if (Date.now() > end) throw new LabServiceError("etcd", "not healthy after 30 s", p.log);
    await sleep(200);
  }
}

/** Stops the lab's etcd (kill -9 when `hard`, as a crash would). */
export async function stopEtcd(s: LabState, hard = false): Promise<void> {
  const p = s.procs.find((x) => x.what === "etcd");
  if (!p) return;
  if (hard) {
    if (isOurProcess(p.pid, `${s.dir}/`)) Deno.kill(p.pid, "SIGKILL");
    while (isOurProcess(p.pid, `${s.dir}/`)) await sleep(20);
  } else await stopProcess(p.pid, `${s.dir}/`);
}

/**
 * The wireguard-go a wireguard lab's daemons run: FLANCTL_WIREGUARD_GO, else the newest build in the dev
 * cache (FLANCTL_DEV_CACHE, default /var/cache/flanctl-dev: tools/peers/build.sh wireguard-go), else
 * `wireguard-go` on PATH; a {@link FlanctlError} naming the fix when there is none.
 */
export function labWireguardGo(env = Deno.env.toObject()): string {
  const set = env[WIREGUARD_GO_ENV];
  if (set) return set;
  const cache = env.FLANCTL_DEV_CACHE || "/var/cache/flanctl-dev";
  const builds: string[] = [];
  try {
    for (const e of Deno.readDirSync(cache)) {
      if (e.isDirectory && e.name.startsWith("wireguard-go-")) {
        builds.push(`${cache}/${e.name}/bin/wireguard-go`);
      }
    }
  } catch { /* no cache */ }
  for (
    const p of [
      ...builds.sort().reverse(),
      ...(env.PATH ?? "").split(":").map((d) => `${d}/wireguard-go`),
    ]
  ) {
    try {
      if (Deno.statSync(p).isFile) return p;
    } catch { /* not there */ }
  }
  throw new FlanctlError(
    `--backend wireguard needs wireguard-go (the userspace WireGuard: this kernel may have no module): ` +
      `tools/peers/build.sh wireguard-go (or ./install.sh --dev) builds it into ${cache}; ` +
      `${WIREGUARD_GO_ENV}=/path points at another`,
    1,
  );
}

/**
 * The daemon command of a node: flannel's flags (see cli/daemon.ts), the lab's store flags, and the
 * node's files at the default paths (the explicit paths below are those same files).
 */
export function daemonCommand(s: LabState, n: NodeState): string[] {
  // The wireguard backend's userspace device: the lab's wireguard-go, named to the daemon (no secret).
  const wg = s.backend === "wireguard"
    ? [
      "env",
      `${WIREGUARD_GO_ENV}=${labWireguardGo()}`,
      ...(s.wireguardWay ? [`${WIREGUARD_WAY_ENV}=${s.wireguardWay}`] : []),
    ]
    : [];
  return withNodeFiles(s, n.netns, n.dir, [
    ...wg,
    ...flanctlCommand(),
    "daemon",
    "--iface",
    "eth0",
    "--subnet-file",
    `${n.dir}/run/flannel/subnet.env`,
    "--state-dir",
    `${n.dir}/var/lib/flanctl/state`,
    "--healthz-ip",
    "127.0.0.1",
    "--healthz-port",
    String(s.healthzPort),
    ...s.storeFlags,
    "--ip-masq=true",
    ...(s.daemonArgs ?? []),
  ]);
}

function daemonProc(s: LabState, n: NodeState): ProcState | undefined {
  return s.procs.find((x) => x.what === `daemon ${n.name}`);
}

/** Starts a node's daemon (or restarts the recorded one). Does not wait; see {@link waitDaemonReady}. */
export async function startDaemon(s: LabState, n: NodeState): Promise<void> {
  let p = daemonProc(s, n);
  if (!p) {
    p = {
      pid: 0,
      what: `daemon ${n.name}`,
      cmd: daemonCommand(s, n),
      netns: n.netns,
      log: `${n.dir}/daemon.log`,
    };
    s.procs.push(p);
    saveState(s);
  }
  await startProc(s, p);
  n.daemonPid = p.pid;
  saveState(s);
}

/** Stops a node's daemon (SIGTERM, or SIGKILL when `hard`). */
export async function stopDaemon(s: LabState, n: NodeState, hard = false): Promise<void> {
  const p = daemonProc(s, n);
  if (!p) return;
  if (hard) {
    if (isOurProcess(p.pid, `${s.dir}/`)) Deno.kill(p.pid, "SIGKILL");
    while (isOurProcess(p.pid, `${s.dir}/`)) await sleep(20);
  } else await stopProcess(p.pid, `${s.dir}/`, 10_000);
}

/** HTTP status of GET `path` on a node's health port (0 when nothing answers). */
export async function probeHealth(s: LabState, n: NodeState, path: "/healthz" | "/readyz"): Promise<number> {
  // Asked from inside the node's namespace (a plain fetch from this process would run in the root one).
  const r = await httpGet(n.netns, `http://127.0.0.1:${s.healthzPort}${path}`, 3000);
  return r.status ?? 0;
}

/** True when the node's subnet.env exists. */
export function subnetEnvExists(n: NodeState): boolean {
  try {
    Deno.statSync(`${n.dir}/run/flannel/subnet.env`);
    return true;
  } catch {
    return false;
  }
}

/** Waits until the node's daemon wrote subnet.env and answers 200 on /readyz. */
export async function waitDaemonReady(
  s: LabState,
  n: NodeState,
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<void> {
  const p = daemonProc(s, n);
  if (!p) throw new FlanctlError(`node ${n.name} has no daemon`, 1);
  const end = Date.now() + (opts.timeoutMs ?? 60_000);
  while (true) {
    opts.signal?.throwIfAborted();
    if (subnetEnvExists(n) && (await probeHealth(s, n, "/readyz")) === 200) return;
    if (!isOurProcess(p.pid, `${s.dir}/`)) throw new LabServiceError(`daemon on ${n.name}`, "exited", p.log);
    if (Date.now() > end) throw new LabServiceError(`daemon on ${n.name}`, "not ready in time", p.log);
    await sleep(200);
  }
}
