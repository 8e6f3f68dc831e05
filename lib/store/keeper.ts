/**
 * Keeps a lease alive the way flanneld does: renew it `renewMarginMs` (default 60 min, flannel's
 * `--subnet-lease-renew-margin`) before it expires, retry a failed renewal after `retryMs` (default 1 min),
 * and report when the lease is gone (expired, revoked, taken over) so the caller re-acquires — flannel
 * exits there; flanctl's daemon can do better.
 * @module
 */
import type { Lease, SubnetStore } from "./types.ts";
import { LeaseNotFoundError } from "./errors.ts";
import { sleep } from "./util.ts";

/** flannel's default renew margin: 60 minutes. */
export const DEFAULT_RENEW_MARGIN_MS = 60 * 60 * 1000;
/** flannel's retry after a failed renewal: 1 minute. */
export const DEFAULT_RENEW_RETRY_MS = 60 * 1000;

/** Options of {@link keepLease}. */
export interface KeepLeaseOptions {
  /** Stops the keeper. */
  signal: AbortSignal;
  /** Renew this long before expiry (default 60 min). With short TTLs, renews at half the remaining time. */
  renewMarginMs?: number;
  /** Wait after a failed renewal (default 1 min). */
  retryMs?: number;
  /** Called with each renewed lease. */
  onRenewed?: (lease: Lease) => void;
  /** Called on a failed renewal that will be retried. */
  onError?: (err: unknown) => void;
}

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

/**
 * Renews `lease` until `signal` aborts. Resolves with the last lease when aborted, or rejects with
 * {@link LeaseNotFoundError} when the lease is gone and must be acquired again.
 */
export async function keepLease(store: SubnetStore, lease: Lease, opts: KeepLeaseOptions): Promise<Lease> {
  let cur = lease;
  let delay = renewDelayMs(cur, opts.renewMarginMs);
  while (!opts.signal.aborted) {
    await sleep(Math.min(delay, 2 ** 31 - 1), opts.signal);
    if (opts.signal.aborted || delay === Infinity) {
      if (delay === Infinity) {
        await new Promise((r) => opts.signal.addEventListener("abort", r, { once: true }));
      }
      break;
    }
    try {
      cur = await store.renewLease(cur);
      opts.onRenewed?.(cur);
      delay = renewDelayMs(cur, opts.renewMarginMs);
    } catch (e) {
      if (e instanceof LeaseNotFoundError) throw e;
      opts.onError?.(e);
      delay = opts.retryMs ?? DEFAULT_RENEW_RETRY_MS;
    }
  }
  return cur;
}
