/**
 * `flanctl daemon` end to end: opens the store and the kernel handle, serves health/metrics, starts the
 * {@link Daemon}, and stops cleanly on SIGTERM/SIGINT (kernel state, rules and the lease stay in place).
 * @module
 */
import { openNetlink } from "../netlink/mod.ts";
import { openStore, type StoreOptions } from "../store/open.ts";
import { VERSION } from "../version.ts";
import { Daemon } from "./daemon.ts";
import { type HealthServer, serveHealth } from "./http.ts";
import { Logger } from "./log.ts";
import type { DaemonOptions } from "./options.ts";
import { sdNotify } from "./sdnotify.ts";

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
  log.info("starting flanctl daemon", { version: VERSION, pid: Deno.pid });
  const store = await openStore(storeOpts);
  const nl = openNetlink();
  const d = new Daemon(o, { nl, store, log, notify });
  const signals: Deno.Signal[] = ["SIGTERM", "SIGINT"];
  const onSignal = () => {
    if (d.stopping) return;
    log.info("signal received: stopping (kernel state, rules and lease stay in place)");
    notify("STOPPING=1");
    d.stop();
  };
  for (const s of signals) Deno.addSignalListener(s, onSignal);
  let http: HealthServer | null = null;
  try {
    if (o.healthzPort > 0) {
      http = serveHealth(o.healthzIP, o.healthzPort, d.metrics, d.notReady);
      log.info("serving /healthz, /readyz, /metrics", { addr: `${o.healthzIP}:${http.port}` });
    }
    try {
      await d.start();
    } catch (e) {
      if (d.stopping) return 0;
      throw e;
    }
    await d.run();
    log.info("stopped");
    return 0;
  } finally {
    await d.close();
    for (const s of signals) Deno.removeSignalListener(s, onSignal);
    await http?.close();
    await store.close();
    nl.close();
  }
}
