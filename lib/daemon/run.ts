/**
 * `flanctl daemon` end to end: opens the store and the kernel handle, serves health/metrics, starts the
 * {@link Daemon}, and stops cleanly on SIGTERM/SIGINT (kernel state, rules and the lease stay in place).
 * @module
 */
import { openNetlink } from "../netlink/mod.ts";
import { execProcess, releaseFreeMemory, unmapBinaryPages } from "../os/mod.ts";
import { openStore, storeChoice, type StoreOptions, storeRecord } from "../store/open.ts";
import type { SubnetStore } from "../store/types.ts";
import { VERSION } from "../base/version.ts";
import { Daemon } from "./daemon.ts";
import { fullGarbageCollection } from "./memory.ts";
import { type HealthServer, serveHealth } from "./http.ts";
import { Logger } from "../base/log.ts";
import type { DaemonOptions } from "./options.ts";
import { sdNotify } from "./sdnotify.ts";
import { type Step, StepError, undoSteps } from "../base/steps.ts";
import {
  daemonRunning,
  daemonStatePath,
  ownDaemonState,
  readDaemonState,
  removeDaemonState,
  writeDaemonState,
} from "../node/daemon_state.ts";
import { errText } from "../base/errors.ts";
import { checkNetpolStore, startNetpol } from "./netpol.ts";

/** Runs the daemon until a signal stops it. Returns the exit code; throws on a fatal startup error. */
export async function runDaemon(o: DaemonOptions, storeOpts: StoreOptions): Promise<number> {
  const log = new Logger({ level: o.logLevel });
  const notify = (s: string) => {
    try {
      sdNotify(s);
    } catch (e) {
      log.warn("sd_notify failed", { error: (e as Error).message });
    }
  };
  checkNetpolStore(o.networkPolicy, storeChoice(storeOpts).kind);
  log.info("starting flanctl daemon", { version: VERSION, pid: Deno.pid });
  logStoreChoice(storeOpts, log);
  // Loading the bundle's pages given back before the store and the backend grow on top of them (the peaks it
  // saves: docs/performance.md, "Daemon memory: peaks").
  try {
    releaseFreeMemory();
    unmapBinaryPages();
  } catch (e) {
    // Not glibc, or no /proc: logged as MemoryRelease logs its failures; the later releases still run.
    log.debug("releasing start-up memory failed", { error: errText(e) });
  }
  // Store warnings (malformed leases, watch retries, net-conf notes) go to the log: stderr stays logfmt.
  // Kube mode's re-list (410 Gone) lists every Node as start-up does: a release before and after it, as
  // start-up releases before its list, and every 1,000 Nodes of any list (the peaks: docs/performance.md,
  // "Kube mode on the real API server"); before and after a re-list the binary's pages too.
  const collectGarbage = fullGarbageCollection();
  const store = await openStore(storeOpts, {
    warn: (msg, fields) => log.warn(msg, fields),
    releaseMemory: (binaryPages) => {
      collectGarbage?.();
      releaseFreeMemory();
      if (binaryPages) unmapBinaryPages();
    },
  });
  const nl = openNetlink();
  const d = new Daemon(o, {
    nl,
    store,
    log,
    notify,
    releaseMemory: () => void releaseFreeMemory(),
    releaseBinaryPages: () => void unmapBinaryPages(),
    // Present when V8 runs with --expose-gc (install.sh's launcher passes it to the daemon).
    collectGarbage,
    jitless: (Deno.env.get("FLANCTL_DAEMON_V8_FLAGS") ?? "").split(",").includes("--jitless"),
    runWithJit: () => runWithJit(log),
  });
  const signals: Deno.Signal[] = ["SIGTERM", "SIGINT"];
  const onSignal = () => {
    if (d.stopping) return;
    log.info("signal received: stopping (kernel state, rules and lease stay in place)");
    notify("STOPPING=1");
    d.stop();
  };
  for (const s of signals) Deno.addSignalListener(s, onSignal);
  const served = healthSteps(o, d, log, storeOpts);
  try {
    try {
      await d.start(served.steps);
    } catch (e) {
      if (d.stopping) return 0;
      // The step's own error (its message and exit code) is what the operator sees; the step is logged.
      throw e instanceof StepError ? e.cause : e;
    }
    // Kube mode: the node's name is known now (env NODE_NAME, the pod's spec.nodeName or --node-name).
    const node = await resolvedNodeName(store);
    if (node) served.recordNode(node);
    const netpol = o.networkPolicy && node
      ? await startNetpol(store, node, log, o.iptablesResync * 1000)
      : null;
    try {
      await d.run();
    } finally {
      await netpol?.stop();
    }
    log.info("stopped", d.exitCode ? { exit_code: d.exitCode } : {});
    return d.exitCode;
  } finally {
    await d.close();
    for (const s of signals) Deno.removeSignalListener(s, onSignal);
    await served.release();
    await store.close();
    nl.close();
  }
}

function logStoreChoice(storeOpts: StoreOptions, log: Logger): void {
  const choice = storeChoice(storeOpts);
  if (choice.implicit) {
    log.warn(
      "no store flag given: using etcd as flanneld does (pass --store-dir DIR for the embedded file store)",
      { store: choice.kind, why: choice.why },
    );
  } else log.info("store chosen", { store: choice.kind, why: choice.why });
}

/**
 * The process's own start-up steps, run before the node's: `http` (/healthz, /readyz, /metrics from the
 * start: readyz says what start-up still waits for) and `state-file` (flanctl.json next to subnet.env, best
 * effort). Both live as long as the process: undone when start-up fails, and by `release()` at the end.
 */
function healthSteps(
  o: DaemonOptions,
  d: Daemon,
  log: Logger,
  storeOpts: StoreOptions,
): { steps: Step<unknown>[]; release: () => Promise<void>; recordNode: (name: string) => void } {
  let http: HealthServer | null = null;
  // Kube mode's node name (the other stores have none: status shows the host's or --netns's name). Until
  // the store resolves it: NODE_NAME (what the store tries first) or --node-name.
  let node = storeChoice(storeOpts).kind === "kube"
    ? Deno.env.get("NODE_NAME") || storeOpts.nodeName || null
    : null;
  const write = () => writeState(o, http, log, node, storeOpts);
  const steps: Step<unknown>[] = [{
    name: "http",
    run() {
      if (o.healthzPort <= 0) return;
      http = serveHealth(o.healthzIP, o.healthzPort, d.metrics, d.notReady, {
        onError: (msg, error) => log.warn(msg, { error }),
      });
      log.info("serving /healthz, /readyz, /metrics", { addr: `${o.healthzIP}:${http.port}` });
    },
    async undo() {
      const h = http;
      http = null;
      await h?.close();
    },
  }, {
    name: "state-file",
    run: write,
    // Only our own: a second daemon that fails must not take the running one's state file with it.
    undo: () => {
      const path = daemonStatePath(o.subnetFile);
      if (stateOwner(path) === Deno.pid) removeDaemonState(path);
    },
  }];
  // Undone steps are idempotent: what a failed start-up released is not released twice.
  return {
    steps,
    release: async () => void await undoSteps(steps, null),
    recordNode(name: string) {
      if (name === node) return;
      node = name;
      if (stateOwner(daemonStatePath(o.subnetFile)) === Deno.pid) write();
    },
  };
}

/** The node name a kube store resolved at start-up (null for the other stores). */
async function resolvedNodeName(store: SubnetStore): Promise<string | null> {
  const s = store as SubnetStore & { nodeName?: () => Promise<string> };
  if (store.kind !== "kube" || typeof s.nodeName !== "function") return null;
  try {
    return await s.nodeName();
  } catch {
    return null;
  }
}

/**
 * Writes flanctl.json next to subnet.env (doctor and status find the daemon through it, and with no store
 * flag open the store it records). Best effort.
 */
function writeState(
  o: DaemonOptions,
  http: HealthServer | null,
  log: Logger,
  node: string | null,
  storeOpts: StoreOptions,
): void {
  const host = o.healthzIP === "0.0.0.0" ? "127.0.0.1" : o.healthzIP === "::" ? "::1" : o.healthzIP;
  const health = http ? (host.includes(":") ? `[${host}]:${http.port}` : `${host}:${http.port}`) : null;
  const path = daemonStatePath(o.subnetFile);
  const owner = stateOwner(path);
  if (owner !== null && owner !== Deno.pid) {
    // Another live daemon was started with this subnet file: its state file stays (status and doctor find
    // that one); this one goes on without.
    log.warn("another daemon runs with this subnet file: its state file is kept", { path, pid: owner });
    return;
  }
  try {
    Deno.mkdirSync(path.slice(0, path.lastIndexOf("/")) || "/", { recursive: true });
    const rec = storeRecord(storeOpts, node);
    writeDaemonState(path, ownDaemonState(VERSION, health, o.subnetFile, node, rec));
  } catch (e) {
    log.warn("cannot write the daemon state file", { path, error: (e as Error).message });
  }
}

/** The pid of the live daemon that `path` (flanctl.json) names, or null (none, unreadable, gone). */
function stateOwner(path: string): number | null {
  try {
    const st = readDaemonState(path);
    return st && daemonRunning(st) === true ? st.pid : null;
  } catch {
    return null;
  }
}

/**
 * The same daemon again with the JIT: this process replaced (execve, same pid) by the runtime with the same
 * arguments, --jitless dropped from its `--v8-flags` and from FLANCTL_DAEMON_V8_FLAGS (so the new one does
 * not do it again). The udp backend asks for it: its packet path runs in JavaScript, and the launcher's
 * --jitless (for memory) costs it most of its speed. Returns only when it cannot: no `--v8-flags` argument
 * with --jitless on the command line, or execve failed (logged; the daemon then goes on without the JIT).
 */
function runWithJit(log: Logger): void {
  const drop = (flags: string) => flags.split(",").filter((f) => f && f !== "--jitless").join(",");
  let argv: string[];
  try {
    argv = Deno.readTextFileSync("/proc/self/cmdline").split("\0").slice(0, -1);
  } catch (e) {
    log.warn("cannot re-run with the JIT: /proc/self/cmdline unreadable", { error: (e as Error).message });
    return;
  }
  const i = argv.findIndex((a) => a.startsWith("--v8-flags=") && a.split(/[=,]/).includes("--jitless"));
  if (i < 0) {
    log.warn("cannot re-run with the JIT: --jitless is not in a --v8-flags argument of this process");
    return;
  }
  argv[i] = `--v8-flags=${drop(argv[i].slice("--v8-flags=".length))}`;
  const env = Deno.env.toObject();
  env.FLANCTL_DAEMON_V8_FLAGS = drop(env.FLANCTL_DAEMON_V8_FLAGS ?? "");
  log.info("udp backend: running again with the JIT (its data path runs in JavaScript)", { pid: Deno.pid });
  try {
    execProcess(Deno.execPath(), argv, env);
  } catch (e) {
    log.warn("cannot re-run with the JIT: execve failed", { error: (e as Error).message });
  }
}
