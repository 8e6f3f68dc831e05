/**
 * The one retry backoff of the product: exponential, optionally jittered, optionally back to the first delay
 * after a quiet spell. The daemon's start-up store retry, the lease keeper's re-acquire and the stores' watch
 * loops (lib/store/util.ts: client-go's shape, reported) each use it with their own {@link BackoffShape}.
 * @module
 */
import { sleep } from "./sleep.ts";

/** A backoff's shape. */
export interface BackoffShape {
  /** The first delay. */
  minMs: number;
  /** The longest delay (before jitter). */
  maxMs: number;
  /** Each delay is the base × (1 + jitter × rand): 0 none, 1.0 spreads it over [base, 2 × base). */
  jitter: number;
  /** Back to the first delay when the last retry was longer ago than this (Infinity: only on `reset()`). */
  resetAfterMs: number;
}

/** The default shape: 0.5 s doubling to 10 s, no jitter, reset only when the call works again. */
export const RETRY_BACKOFF: Readonly<BackoffShape> = {
  minMs: 500,
  maxMs: 10_000,
  jitter: 0,
  resetAfterMs: Infinity,
};

/** How {@link Backoff.wait} sleeps. */
export interface WaitOptions {
  /** Ends the sleep early (with lib/base/sleep.ts's `sleep`). */
  signal?: AbortSignal;
  /** Told the delay before sleeping it. */
  announce?: (ms: number) => void;
  /** The caller's own sleep instead (e.g. one another event can wake); `signal` is then unused. */
  sleep?: (ms: number) => Promise<void>;
}

/**
 * The delay before the next try is {@link Backoff.ms} (drawn once per step, so it can be logged and then
 * slept); {@link Backoff.grow} doubles it up to `maxMs`, {@link Backoff.next} takes it and grows,
 * {@link Backoff.wait} sleeps it and grows, {@link Backoff.reset} goes back to `minMs` once the call works.
 */
export class Backoff {
  readonly shape: Readonly<BackoffShape>;
  #base: number;
  #ms: number;
  #last = -Infinity;

  /** Fields left out of `shape` are {@link RETRY_BACKOFF}'s. */
  constructor(shape: Partial<BackoffShape> = {}) {
    this.shape = { ...RETRY_BACKOFF, ...shape };
    this.#base = this.shape.minMs;
    this.#ms = this.#draw();
  }

  #draw(): number {
    const j = this.shape.jitter;
    return j ? Math.round(this.#base * (1 + j * Math.random())) : this.#base;
  }

  /** The delay before the next try (jittered). */
  get ms(): number {
    return this.#ms;
  }

  /** Doubles the delay, up to `maxMs`. */
  grow(): void {
    this.#base = Math.min(this.#base * 2, this.shape.maxMs);
    this.#ms = this.#draw();
  }

  /** Back to the first delay. */
  reset(): void {
    this.#base = this.shape.minMs;
    this.#ms = this.#draw();
  }

  /** The delay to wait now (first back to `minMs` after `resetAfterMs` without a retry); grows the next. */
  next(): number {
    const now = Date.now();
    if (now - this.#last > this.shape.resetAfterMs) this.reset();
    this.#last = now;
    const ms = this.#ms;
    this.grow();
    return ms;
  }

  /**
   * Sleeps {@link next}'s delay, told first to `announce` (for the retry's log line): with `sleep` when the
   * caller has its own (one it can wake early), else {@link sleep} cut short by `signal`.
   */
  async wait(o: WaitOptions = {}): Promise<void> {
    const ms = this.next();
    o.announce?.(ms);
    await (o.sleep ? o.sleep(ms) : sleep(ms, o.signal));
    this.#last = Date.now();
  }
}
