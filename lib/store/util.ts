/**
 * Small helpers shared by the stores: an in-process mutex, abortable sleep, a wake-up signal and the
 * default lease TTL.
 * @module
 */

/** flannel's lease TTL: 24 hours. */
export const DEFAULT_LEASE_TTL_MS = 24 * 3600 * 1000;

/** A FIFO mutex for async code within one process. */
export class Mutex {
  #tail: Promise<void> = Promise.resolve();

  /** Runs `fn` when every earlier holder has finished. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const prev = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((r) => release = r);
    return prev.then(fn).finally(release);
  }
}

/** Resolves after `ms` or as soon as `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** A level-triggered wake-up: `notify()` any number of times, `wait()` resolves once per batch. */
export class Wakeup {
  #pending = false;
  #waiter: (() => void) | null = null;

  /** Marks work pending and wakes the waiter. */
  notify(): void {
    this.#pending = true;
    const w = this.#waiter;
    this.#waiter = null;
    w?.();
  }

  /** Resolves when work is pending (immediately if it already is), after `ms` or on abort. */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    if (this.#pending || signal.aborted) {
      this.#pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        signal.removeEventListener("abort", done);
        this.#waiter = null;
        this.#pending = false;
        resolve();
      };
      const t = setTimeout(done, Math.max(0, Math.min(ms, 2 ** 31 - 1)));
      signal.addEventListener("abort", done, { once: true });
      this.#waiter = done;
    });
  }
}

/** The message of an unknown thrown value. */
export function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
