/**
 * The daemon after start-up: serves peers from the store's watch (each event applied at once), runs a full
 * reconcile every `--resync-interval`, re-checks the rules every `--iptables-resync`, probes the store, and
 * renews the lease (re-acquiring it when it disappears; a revoked lease ends the daemon with
 * {@link REVOKED_EXIT_CODE}). It reads the fixed {@link NodeContext}; only its `state` (our lease and subnet)
 * changes. Stopping leaves kernel state, rules and the lease in place.
 * @module
 */
import { ConfigError } from "../config/netconf.ts";
import { StoreUnavailableError } from "../store/errors.ts";
import { LeaseKeeper } from "../store/keeper.ts";
import type { Lease, LeaseEvent } from "../store/types.ts";
import { subnetOf } from "./family.ts";
import { leaseId } from "./peer_gate.ts";
import type { NodeContext } from "./context.ts";
import { withStoreTimeout } from "../store/util.ts";
import { sleep } from "../base/sleep.ts";
import { ensureDevice, ensureRules, ruleSpec, writeNodeSubnetEnv } from "./steps.ts";
import { errText } from "../base/errors.ts";

/** Exit code of a daemon whose own lease was revoked in the store. */
export const REVOKED_EXIT_CODE = 3;

/** The running node. */
export class RunLoop {
  readonly ctx: NodeContext;
  readonly #stop: () => void;
  readonly #keeper: LeaseKeeper;
  #exitCode = 0;
  /** The network config last seen in the store (a change is logged once: it needs a restart). */
  #cfgSource: string;

  /** `stop` ends the run (it aborts `ctx.signal`). */
  constructor(ctx: NodeContext, stop: () => void) {
    this.ctx = ctx;
    this.#stop = stop;
    this.#cfgSource = ctx.cfg.source;
    this.#keeper = this.#newKeeper();
    ctx.readiness.leaseInvalid = () => this.#keeper.whyInvalid();
    ctx.peers.onOwnClaimed(() => this.#reclaim());
  }

  /** A write-back of our lease is running (claims seen meanwhile start one more after it). */
  #reclaiming: Promise<void> | null = null;
  #reclaimAgain = false;

  /**
   * Another writer overwrote our lease record (Peers said so loudly): writes ours back at once, as a
   * compare-and-swap against the record as it is (lib/store's reclaimLease). One write at a time; a claim
   * seen during it triggers one more.
   */
  #reclaim(): void {
    if (this.#reclaiming) {
      this.#reclaimAgain = true;
      return;
    }
    const { store, state, log, metrics, signal } = this.ctx;
    if (!store.reclaimLease || signal.aborted) return;
    this.#reclaiming = (async () => {
      do {
        this.#reclaimAgain = false;
        try {
          const l = await withStoreTimeout(
            store.reclaimLease!(state.lease),
            10_000,
            "writing our lease back",
          );
          state.lease = { ...state.lease, expiration: l.expiration ?? state.lease.expiration };
          metrics.ownLeaseRewrites++;
          log.warn("our lease is written back", {
            subnet: state.own.toString(),
            public_ip: state.lease.attrs.PublicIP,
          });
        } catch (e) {
          log.error("writing our lease back failed; the next claim or renewal retries", {
            subnet: state.own.toString(),
            error: errText(e),
          });
        }
      } while (this.#reclaimAgain && !signal.aborted);
    })().finally(() => this.#reclaiming = null);
  }

  /** 0, or {@link REVOKED_EXIT_CODE} once our lease was deleted in the store. */
  get exitCode(): number {
    return this.#exitCode;
  }

  /** The renewal policy (lib/store/keeper.ts); its callbacks keep metrics, logs and readiness current. */
  #newKeeper(): LeaseKeeper {
    const { store, state, attrs, signal, o, metrics, log, readiness } = this.ctx;
    return new LeaseKeeper(store, state.lease, attrs, {
      signal,
      renewMarginMs: o.subnetLeaseRenewMargin * 60_000,
      onRenewed: (l) => {
        state.lease = l;
        metrics.leaseRenewals++;
        log.info("lease renewed", {
          subnet: state.own.toString(),
          expires: l.expiration?.toISOString() ?? "never",
        });
      },
      onLost: (why) => {
        log.warn("our lease is gone; re-acquiring the same subnet", {
          subnet: state.own.toString(),
          reason: why,
        });
      },
      onAcquired: (l) => this.#onReacquired(l),
      onError: (what, e) => {
        if (what.startsWith("renewing")) metrics.leaseRenewalErrors++;
        if (e instanceof StoreUnavailableError) readiness.setStoreUp(false, errText(e));
      },
      onProblem: (what, cause) => {
        if (cause === null) log.info(`${what} works again`, { subnet: state.own.toString() });
        else log.warn(`${what} failed; retrying with backoff`, { subnet: state.own.toString(), cause });
      },
      onValidity: (valid) => {
        if (!valid) log.warn("no valid lease: not ready", { reason: this.#keeper?.whyInvalid() });
        else log.info("lease valid again", { subnet: state.own.toString() });
      },
    });
  }

  /** Applies one batch of store events. */
  applyEvents(events: LeaseEvent[]): void {
    this.ctx.peers.apply(events, (l) => this.#onOwnLeaseGone(l));
  }

  /**
   * Our lease left the store (`removed` from the watch, or missing from a re-list). Removed before its expiry
   * (revoked with `flanctl lease revoke`, etcdctl del, …): exit as flanneld does ("Lease has been revoked.
   * Shutting down daemon."), so the supervisor restarts the daemon and it acquires anew. Expired (our
   * renewals failed, e.g. the store refused writes): the keeper re-acquires it.
   */
  #onOwnLeaseGone(removed?: Lease): void {
    const { signal, state, log, notify } = this.ctx;
    if (signal.aborted) return;
    const exp = (removed ?? state.lease)?.expiration;
    const expired = exp !== null && exp !== undefined && exp.getTime() <= Date.now();
    if (expired) {
      this.#keeper.lost("it expired");
      return;
    }
    log.error("lease has been revoked: shutting down so the supervisor restarts the daemon", {
      subnet: state.own.toString(),
    });
    this.#exitCode = REVOKED_EXIT_CODE;
    notify("STOPPING=1\nSTATUS=lease revoked");
    this.#stop();
  }

  /** After our subnet (either family) changed: device, subnet.env, rules and a full pass for the new one. */
  async #reconfigure(): Promise<void> {
    const n = this.ctx;
    ensureDevice(n);
    writeNodeSubnetEnv(n);
    n.rules.set(ruleSpec(n, n.state.own));
    await ensureRules(n).catch((e) => n.log.error(`${n.rules.mode} rules failed`, { error: errText(e) }));
    n.peers.fullPass();
  }

  /** Applies a lease acquired again after it was lost (the same subnet, or a new one if it was taken). */
  async #onReacquired(lease: Lease): Promise<void> {
    const { state, family, v6, log, reconciler, peers } = this.ctx;
    state.lease = lease;
    const s = subnetOf(lease, family);
    if (!s) throw new ConfigError("Network", `the store returned a lease without an IPv${family} subnet`);
    const s6 = v6 ? lease.ipv6Subnet : null;
    if (s6 && !s6.equals(v6!.own)) {
      log.warn("our IPv6 subnet changed (the old one was taken); reconfiguring", {
        old: v6!.own.toString(),
        new: s6.toString(),
      });
      v6!.setOwn(s6);
      if (s.equals(state.own)) await this.#reconfigure();
    }
    if (!s.equals(state.own)) {
      log.warn("our subnet changed (the old one was taken); reconfiguring", {
        old: state.own.toString(),
        new: s.toString(),
      });
      state.own = s;
      reconciler.setOwnSubnet(s);
      peers.forget(s);
      await this.#reconfigure();
    } else {
      log.info("lease re-acquired", { subnet: s.toString() });
    }
  }

  async #watchLoop(): Promise<void> {
    const { signal, store, readiness, peers, state } = this.ctx;
    let cursor = this.ctx.watchCursor;
    while (!signal.aborted) {
      try {
        for await (const batch of store.watchLeases(cursor, signal)) {
          if (signal.aborted) break;
          this.applyEvents(batch);
        }
        if (signal.aborted) break;
        throw new StoreUnavailableError("the watch ended");
      } catch (e) {
        if (signal.aborted) break;
        readiness.setStoreUp(false, errText(e));
        await sleep(1000, signal);
        try {
          const { leases, cursor: c } = await withStoreTimeout(store.listLeases(), 10_000, "listing leases");
          cursor = c;
          peers.reset(leases);
          const ours = leaseId(state.lease);
          if (!leases.some((l) => leaseId(l) === ours)) this.#onOwnLeaseGone();
          readiness.setStoreUp(true);
          peers.fullPass();
        } catch (e2) {
          readiness.setStoreUp(false, errText(e2));
        }
      }
    }
  }

  /** Periodic work: device + peer resync, rule check, store probe. No per-peer timers. */
  async #every(ms: number, what: string, fn: () => Promise<void> | void): Promise<void> {
    const { signal, log } = this.ctx;
    while (!signal.aborted) {
      await sleep(ms, signal);
      if (signal.aborted) break;
      try {
        await fn();
      } catch (e) {
        log.error(`${what} failed`, { error: errText(e) });
      }
    }
  }

  #resync(): void {
    try {
      ensureDevice(this.ctx);
    } catch (e) {
      this.ctx.metrics.reconcileErrors++;
      this.ctx.log.error("repairing the backend device failed", { error: errText(e) });
      return;
    }
    this.ctx.peers.fullPass();
  }

  async #probeStore(): Promise<void> {
    const { store, readiness, log } = this.ctx;
    try {
      const cfg = await withStoreTimeout(store.getNetworkConfig(), 5_000, "reading the network config");
      readiness.setStoreUp(true);
      if (cfg.source.trim() !== this.#cfgSource.trim()) {
        log.warn("the network config in the store changed; restart the daemon to apply it");
        this.#cfgSource = cfg.source;
      }
    } catch (e) {
      readiness.setStoreUp(false, errText(e));
    }
  }

  /** Serves until the context's signal aborts. */
  async run(): Promise<void> {
    const o = this.ctx.o;
    await Promise.all([
      this.#watchLoop(),
      this.#every(o.resyncInterval * 1000, "resync", () => this.#resync()),
      this.#every(o.iptablesResync * 1000, "iptables resync", () => ensureRules(this.ctx)),
      this.#every(Math.min(o.resyncInterval, 5) * 1000, "store probe", () => this.#probeStore()),
      this.#keeper.run(),
    ]);
  }
}
