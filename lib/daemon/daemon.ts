/**
 * The node daemon: {@link Daemon.start} runs the start-up steps (lib/daemon/bootstrap.ts, steps.ts: choose
 * the interface, read the network config, acquire the lease, set up the backend, write subnet.env, install
 * the rules, program the peers) into a fixed node context; {@link Daemon.run} then serves it
 * (lib/daemon/run_loop.ts: store watch, resyncs, lease renewal). On SIGTERM/SIGINT it stops and leaves the
 * kernel state and the lease in place, so pod traffic keeps flowing across a restart.
 * @module
 */
import type { ExternalIface } from "../backend/types.ts";
import type { IPNet } from "../base/cidr.ts";
import type { LeaseEvent } from "../store/types.ts";
import type { Step } from "../base/steps.ts";
import { bootstrap } from "./bootstrap.ts";
import type { DaemonDeps, NodeBase } from "./context.ts";
import { MemoryRelease } from "./memory.ts";
import { Metrics } from "./metrics.ts";
import type { DaemonOptions } from "./options.ts";
import { Readiness } from "./readiness.ts";
import { RunLoop } from "./run_loop.ts";
import type { Draft } from "./steps.ts";

export type { DaemonDeps } from "./context.ts";
export { REVOKED_EXIT_CODE } from "./run_loop.ts";

/** The running daemon. */
export class Daemon {
  readonly metrics: Metrics = new Metrics();
  readonly #base: NodeBase;
  readonly #stop = new AbortController();
  readonly #readiness: Readiness;
  readonly #memory: MemoryRelease;
  /** The node, once started. */
  #node: RunLoop | null = null;

  constructor(o: DaemonOptions, deps: DaemonDeps) {
    this.#readiness = new Readiness(this.metrics, deps.log);
    this.#base = {
      o,
      nl: deps.nl,
      store: deps.store,
      log: deps.log,
      notify: deps.notify ?? (() => {}),
      runIptables: deps.runIptables,
      metrics: this.metrics,
      readiness: this.#readiness,
      memory: this.#memory = new MemoryRelease(deps, deps.log),
      jitless: deps.jitless ?? false,
      runWithJit: deps.runWithJit,
      signal: this.#stop.signal,
    };
  }

  #started(): RunLoop {
    if (!this.#node) throw new Error("the daemon has not started");
    return this.#node;
  }

  /** Our subnet (after start). */
  get subnet(): IPNet {
    return this.#started().ctx.state.own;
  }

  /** The chosen external interface (after start). */
  get iface(): ExternalIface {
    return this.#started().ctx.ext;
  }

  /** Why /readyz fails, or null when ready. */
  notReady = (): string | null => this.#readiness.notReady();

  /**
   * Start-up, up to readiness: `first` (the caller's steps, e.g. the health server), then the node's steps.
   * Throws a StepError (lib/base/steps.ts; its `cause` the ConfigError, IfaceError, FirewallError, … of the step)
   * on a fatal problem, after undoing what start-up must not leave behind.
   */
  async start(first: readonly Step<Draft>[] = []): Promise<void> {
    const ctx = await bootstrap(this.#base, first);
    this.#node = new RunLoop(ctx, () => this.stop());
  }

  /** Applies one batch of store events (after start). */
  applyEvents(events: LeaseEvent[]): void {
    this.#started().applyEvents(events);
  }

  /**
   * Exit code for the process: 0, or REVOKED_EXIT_CODE once our lease was deleted in the store. As flanneld
   * ("Lease has been revoked. Shutting down daemon."), the daemon then stops so its supervisor restarts it
   * and it acquires anew: `flanctl lease revoke` really takes the subnet away (kernel state and rules stay
   * in place, as on any stop).
   */
  get exitCode(): number {
    return this.#node?.exitCode ?? 0;
  }

  /** Serves until {@link stop} is called. */
  async run(): Promise<void> {
    await this.#started().run();
  }

  /** Stops what the backend runs (udp data-path workers); kernel state stays. Safe to call twice. */
  async close(): Promise<void> {
    const ctx = this.#node?.ctx;
    await ctx?.backend.close?.();
    await ctx?.v6?.backend.close?.();
  }

  /** Stops serving. Kernel state, rules and the lease are left in place. */
  stop(): void {
    if (this.#stop.signal.aborted) return;
    this.#stop.abort();
    this.#memory.stop();
  }

  /** True once {@link stop} was called. */
  get stopping(): boolean {
    return this.#stop.signal.aborted;
  }
}
