/**
 * The one sleep and the one timeout of the product (a leaf: stores, daemon, doctor, lab and CLI use these
 * instead of their own `new Promise(setTimeout…)`; the one retry backoff is lib/base/backoff.ts).
 * @module
 */

/** The longest delay a timer takes (larger ones fire at once); longer sleeps are cut to it. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Resolves after `ms`, or as soon as `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, Math.max(0, Math.min(ms, MAX_TIMER_MS)));
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** `p`, or a rejection with `timeoutError()` when `p` has not settled after `ms`. */
export function withTimeout<T>(p: Promise<T>, ms: number, timeoutError: () => Error): Promise<T> {
  let t: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, rej) => {
    t = setTimeout(() => rej(timeoutError()), Math.max(0, Math.min(ms, MAX_TIMER_MS)));
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}
