/**
 * The one renewal policy: keeps a node's lease alive the way flanneld does — renew it `renewMarginMs`
 * (flannel's `--subnet-lease-renew-margin`, default 60 min) before it expires; with a TTL shorter than the
 * margin, half-way — and, unlike flanneld (which exits), re-acquires it when it is gone, asking for the
 * same subnet.
 *
 * No store error ends the loop: a failed renewal is retried after a quarter of the time left (0.5 s–60 s),
 * and once the lease is gone every failed acquire is retried with exponential backoff (0.5 s–10 s),
 * whatever the error (unreachable store, EPERM/EROFS/ENOSPC from the file store, etcd auth or quota
 * errors, a broken config). The cause is reported once per change, not per try. While no valid lease is
 * held (lost, or past its expiration), {@link LeaseKeeper.valid} is false so the daemon can report
 * itself not ready.
 * @module
 */
import type { Lease, LeaseAttrsWire, SubnetStore } from "./types.ts";
import { LeaseNotFoundError } from "./errors.ts";
import { storeErrorCause, storeErrorKind } from "./classify.ts";
import { sleep } from "../base/sleep.ts";
import { withStoreTimeout } from "./util.ts";
import { Backoff } from "../base/backoff.ts";
import { errText } from "../base/errors.ts";

/** flannel's default renew margin: 60 minutes. */
export const DEFAULT_RENEW_MARGIN_MS = 60 * 60 * 1000;
/** The longest wait between renewal retries while the lease is still valid (flannel retries after 1 min). */
export const DEFAULT_RENEW_RETRY_MS = 60 * 1000;
/** The longest wait between acquire retries once the lease is gone. */
export const MAX_ACQUIRE_RETRY_MS = 10_000;
const MIN_RETRY_MS = 500;

/** How long to wait before renewing `lease` (ms). Reservations (no expiry) are never renewed: Infinity. */
export function renewDelayMs(
  lease: Lease,
  marginMs: number = DEFAULT_RENEW_MARGIN_MS,
  now: number = Date.now(),
): number {
  if (!lease.expiration) return Infinity;
  const left = lease.expiration.getTime() - now;
  const d = left - marginMs;
  return d > 0 ? d : Math.max(left / 2, 50);
}

/** Options of {@link LeaseKeeper}. */
export interface LeaseKeeperOptions {
  /** Stops the keeper. */
  signal: AbortSignal;
  /** Renew this long before expiry (default 60 min). */
  renewMarginMs?: number;
  /** Longest wait between renewal retries (default 1 min). */
  renewRetryMaxMs?: number;
  /** Longest wait between acquire retries (default 10 s). */
  acquireRetryMaxMs?: number;
  /** Each store call is abandoned after this (default 10 s). */
  callTimeoutMs?: number;
  /** Each renewed lease. */
  onRenewed?: (lease: Lease) => void;
  /** A lease acquired again after it was lost (its subnet may differ from the old one). */
  onAcquired?: (lease: Lease, old: Lease) => Promise<void> | void;
  /** The lease is gone (expired, revoked or taken over); re-acquiring starts now. */
  onLost?: (why: string) => void;
  /** A store problem (`cause` set) or its end (`cause` null); called once per change of cause. */
  onProblem?: (what: string, cause: string | null) => void;
  /** Every failed store call (for metrics), before any retry. */
  onError?: (what: string, error: unknown) => void;
  /** Validity changed (see {@link LeaseKeeper.valid}). */
  onValidity?: (valid: boolean) => void;
}

/** Keeps one lease; {@link run} until the signal aborts. */
export class LeaseKeeper {
  readonly #store: SubnetStore;
  readonly #attrs: LeaseAttrsWire;
  readonly #o: LeaseKeeperOptions;
  #lease: Lease;
  #held = true;
  #lostWhy = "";
  #cause: string | null = null;
  #valid = true;
  #wake: (() => void) | null = null;

  constructor(store: SubnetStore, lease: Lease, attrs: LeaseAttrsWire, opts: LeaseKeeperOptions) {
    this.#store = store;
    this.#lease = lease;
    this.#attrs = attrs;
    this.#o = opts;
  }

  /** The current (or last held) lease. */
  get lease(): Lease {
    return this.#lease;
  }

  /** True while a lease is held and not past its expiration. */
  get valid(): boolean {
    const exp = this.#lease.expiration;
    return this.#held && (exp === null || exp.getTime() > Date.now());
  }

  /** Why there is no valid lease, or null when there is one. */
  whyInvalid(): string | null {
    if (this.valid) return null;
    if (!this.#held) return `our lease is gone (${this.#lostWhy}); re-acquiring`;
    return `our lease expired at ${this.#lease.expiration!.toISOString()} and could not be renewed` +
      (this.#cause ? ` (${this.#cause})` : "");
  }

  /** Tells the keeper the lease is gone (e.g. the watch saw it removed): re-acquire now. */
  lost(why: string): void {
    if (this.#o.signal.aborted || !this.#held) return;
    this.#setLost(why);
    this.#wake?.();
  }

  /** Renews (and re-acquires) until the signal aborts. Never rejects. */
  async run(): Promise<void> {
    const signal = this.#o.signal;
    const backoff = new Backoff({
      minMs: MIN_RETRY_MS,
      maxMs: this.#o.acquireRetryMaxMs ?? MAX_ACQUIRE_RETRY_MS,
    });
    let renewFailing = false;
    /** When the next renewal is due (ms since the epoch); null = compute from the lease. */
    let nextTry: number | null = null;
    while (!signal.aborted) {
      this.#checkValidity();
      if (this.#held) {
        const exp = this.#lease.expiration;
        const now = Date.now();
        if (nextTry === null) {
          nextTry = now + renewDelayMs(this.#lease, this.#o.renewMarginMs);
          if (renewFailing && exp) {
            const left = exp.getTime() - now;
            const retryMax = this.#o.renewRetryMaxMs ?? DEFAULT_RENEW_RETRY_MS;
            nextTry = now + (left > 0 ? Math.max(MIN_RETRY_MS, Math.min(retryMax, left / 4)) : backoff.ms);
            if (left <= 0) backoff.grow();
          }
        }
        // Wake at the expiration too, so validity (readiness) flips on time.
        let wait = nextTry - now;
        if (exp && exp.getTime() > now) wait = Math.min(wait, exp.getTime() - now + 5);
        await this.#sleep(wait);
        if (signal.aborted) break;
        if (!this.#held) { // lost() while sleeping
          nextTry = null;
          continue;
        }
        if (Date.now() < nextTry) continue; // woke for the validity check only
        nextTry = null;
        try {
          const l = await withStoreTimeout(
            this.#store.renewLease(this.#lease),
            this.#o.callTimeoutMs ?? 10_000,
            "renewing the lease",
          );
          this.#lease = l;
          renewFailing = false;
          backoff.reset();
          this.#problem("renewing the lease", null);
          this.#o.onRenewed?.(l);
        } catch (e) {
          if (signal.aborted) break;
          if (e instanceof LeaseNotFoundError) {
            this.#setLost(errText(e));
            backoff.reset();
            continue;
          }
          renewFailing = true;
          this.#o.onError?.("renewing the lease", e);
          this.#problem("renewing the lease", e);
        }
        continue;
      }
      try {
        const old = this.#lease;
        const l = await withStoreTimeout(
          this.#store.acquireLease(this.#attrs, { previousSubnet: old.subnet }),
          this.#o.callTimeoutMs ?? 10_000,
          "re-acquiring the lease",
        );
        this.#lease = l;
        this.#held = true;
        renewFailing = false;
        backoff.reset();
        this.#problem("re-acquiring the lease", null);
        this.#checkValidity();
        try {
          await this.#o.onAcquired?.(l, old);
        } catch (e) {
          this.#problem("applying the re-acquired lease", e);
        }
      } catch (e) {
        if (signal.aborted) break;
        this.#o.onError?.("re-acquiring the lease", e);
        this.#problem("re-acquiring the lease", e);
        await backoff.wait({ sleep: (ms) => this.#sleep(ms) });
      }
    }
  }

  #setLost(why: string): void {
    this.#held = false;
    this.#lostWhy = why;
    this.#o.onLost?.(why);
    this.#checkValidity();
  }

  /** Reports `e` (or recovery, null) when its kind differs from the last one reported. */
  #problem(what: string, e: unknown): void {
    // Keyed by operation, kind and class: messages carry varying details (temp file names, revisions).
    const code = e instanceof Error ? String((e as { code?: unknown }).code ?? e.name) : "";
    const key = e === null ? null : `${what}: ${storeErrorKind(e)}: ${code}`;
    const cause = e === null ? null : storeErrorCause(e);
    if (key === this.#cause) return;
    const had = this.#cause !== null;
    this.#cause = key;
    if (cause !== null || had) this.#o.onProblem?.(what, cause);
  }

  #checkValidity(): void {
    const v = this.valid;
    if (v !== this.#valid) {
      this.#valid = v;
      this.#o.onValidity?.(v);
    }
  }

  /** The one sleep, cut short by the keeper's signal or by {@link LeaseKeeper}'s own wake-up. */
  #sleep(ms: number): Promise<void> {
    const wake = new AbortController();
    this.#wake = () => wake.abort();
    return sleep(ms, AbortSignal.any([this.#o.signal, wake.signal])).finally(() => (this.#wake = null));
  }
}
