/**
 * The one sleep, the one timeout and the one retry backoff of the product (a leaf: stores, daemon,
 * doctor, lab and CLI use these instead of their own `new Promise(setTimeout…)` and doubling delays).
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

/**
 * The one retry backoff: `ms` starts at `minMs` (0.5 s) and doubles on each {@link RetryDelay.grow} (or
 * {@link RetryDelay.wait}) up to `maxMs` (10 s); {@link RetryDelay.reset} once the call works again. The
 * stores' watch loops, the daemon's start-up store retry and the lease keeper's re-acquire all use it.
 */
export class RetryDelay {
  /** The first delay. */
  readonly minMs: number;
  /** The longest delay. */
  readonly maxMs: number;
  #ms: number;

  /** Each delay is the base × (1 + jitter × rand) (0: none; client-go's reflector uses 1.0). */
  readonly jitter: number;
  #jittered: number;

  constructor(minMs = 500, maxMs = 10_000, jitter = 0) {
    this.minMs = minMs;
    this.maxMs = maxMs;
    this.jitter = jitter;
    this.#ms = minMs;
    this.#jittered = this.#jitter();
  }

  #jitter(): number {
    return this.jitter ? Math.round(this.#ms * (1 + this.jitter * Math.random())) : this.#ms;
  }

  /** The delay before the next try (jittered). */
  get ms(): number {
    return this.#jittered;
  }

  /** Doubles the delay, up to `maxMs`. */
  grow(): void {
    this.#ms = Math.min(this.#ms * 2, this.maxMs);
    this.#jittered = this.#jitter();
  }

  /** Back to the first delay. */
  reset(): void {
    this.#ms = this.minMs;
    this.#jittered = this.#jitter();
  }

  /** Sleeps the current delay (cut short by `signal`), then doubles it. */
  async wait(signal?: AbortSignal): Promise<void> {
    await sleep(this.#jittered, signal);
    this.grow();
  }
}
