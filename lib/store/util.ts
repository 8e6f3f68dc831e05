/**
 * Small helpers shared by the stores: an in-process mutex, a wake-up signal, the
 * default lease TTL, the watch loops' retry backoff, reading a newline-delimited JSON stream and diffing
 * two lease snapshots.
 * @module
 */
import { stderrLine, type Warn } from "../base/warn.ts";
import { RetryDelay } from "../base/sleep.ts";
import type { Lease, LeaseEvent } from "./types.ts";

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

/**
 * The watch loops' retry, reported: the one backoff ({@link RetryDelay}: 0.5 s, doubling up to 10 s);
 * `reset()` once the connection works again.
 */
export class Backoff {
  #delay = new RetryDelay();
  #warn: Warn | undefined;

  /** `warn` receives the retry and recovery lines (default: `flanctl: LINE` on stderr). */
  constructor(warn?: Warn) {
    this.#warn = warn;
  }

  #report(line: string): void {
    if (this.#warn) this.#warn(line);
    else stderrLine(`flanctl: ${line}`);
  }

  /** Back to the first delay. */
  reset(): void {
    this.#delay.reset();
  }

  /** Reports `msg` (the connection works again after a failure) where the retry lines go, and resets. */
  recovered(msg: string): void {
    this.#report(msg);
    this.reset();
  }

  /** Reports `MSG; retrying in Ns`, sleeps that long (cut short by `signal`), then doubles. */
  async wait(msg: string, signal: AbortSignal): Promise<void> {
    this.#report(`${msg}; retrying in ${this.#delay.ms / 1000}s`);
    await this.#delay.wait(signal);
  }
}

/** The size of the one buffer {@link jsonLines} reads a byte stream into: fetch's own chunk size. */
export const JSON_LINES_CHUNK = 64 * 1024;

/**
 * Yields each non-blank line of a streamed HTTP body (etcd's and the Kubernetes API's watch streams: one
 * JSON object per line) parsed as JSON. Cancels the body when the consumer stops, and when `signal` aborts:
 * the fetch's own signal is not enough. Measured (Deno 2.9.6, etcd store): after a watch delivered 4,000
 * leases, aborting the fetch's signal no longer ended a pending read of its body, and the daemon hung on
 * SIGTERM for good (at 1,000 it stopped in ms); the stream's dependent abort signal inside fetch seems to be
 * collected by then (cf. denoland/deno#29075). Cancelling the reader here ends the read at once.
 *
 * A byte stream (fetch's bodies are) is read with a BYOB reader into one reused {@link JSON_LINES_CHUNK}
 * buffer and decoded with a streaming TextDecoder: the default reader (a TextDecoderStream on it before)
 * has fetch allocate a fresh 64 KiB chunk for every read, garbage that piles up in a burst of events
 * until the next GC (the peaks it saves: docs/performance.md, "Watch streams"). Any other stream is read with
 * its default reader.
 */
export async function* jsonLines<T>(
  body: ReadableStream<Uint8Array>,
  signal?: AbortSignal,
): AsyncGenerator<T> {
  let byob: ReadableStreamBYOBReader | null = null;
  try {
    byob = body.getReader({ mode: "byob" });
  } catch (e) {
    if (!(e instanceof TypeError)) throw e; // TypeError: not a byte stream, the default reader below
  }
  const plain = byob ? null : body.getReader();
  const reader: { cancel(): Promise<void> } = byob ?? plain!;
  const onAbort = () => void reader.cancel().catch(() => {});
  if (signal?.aborted) onAbort();
  signal?.addEventListener("abort", onAbort, { once: true });
  const decoder = new TextDecoder();
  // A BYOB read hands the buffer over to the stream and back (a new ArrayBuffer object, same memory).
  let chunk = new Uint8Array(byob ? JSON_LINES_CHUNK : 0);
  let buf = "";
  try {
    while (true) {
      let bytes: Uint8Array | undefined;
      if (byob) {
        const r = await byob.read(chunk);
        if (r.done) return;
        bytes = r.value;
        chunk = new Uint8Array(r.value.buffer);
      } else {
        const r = await plain!.read();
        if (r.done) return;
        bytes = r.value;
      }
      buf += decoder.decode(bytes, { stream: true });
      let from = 0, nl: number;
      while ((nl = buf.indexOf("\n", from)) >= 0) {
        const line = buf.slice(from, nl).trim();
        from = nl + 1;
        if (line) yield JSON.parse(line) as T;
      }
      if (from) buf = buf.slice(from);
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    await reader.cancel().catch(() => {});
  }
}

/**
 * The watch events that turn snapshot `known` into snapshot `cur` (same keys = same lease): "removed" for
 * each key gone, then "added" for each key new or changed (`same` false).
 */
export function diffLeases(
  known: Map<string, Lease>,
  cur: Map<string, Lease>,
  same: (old: Lease, cur: Lease) => boolean,
): LeaseEvent[] {
  const events: LeaseEvent[] = [];
  for (const [k, old] of known) if (!cur.has(k)) events.push({ type: "removed", lease: old });
  for (const [k, l] of cur) {
    const old = known.get(k);
    if (!old || !same(old, l)) events.push({ type: "added", lease: l });
  }
  return events;
}
