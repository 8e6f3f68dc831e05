/**
 * Small helpers shared by the stores: an in-process mutex, a wake-up signal, the
 * default lease TTL, the watch loops' retry backoff, the timeout of a store call, reading a
 * newline-delimited JSON stream and diffing two lease snapshots.
 * @module
 */
import { stderrLine, type Warn } from "../base/warn.ts";
import { Backoff, type BackoffShape } from "../base/backoff.ts";
import { withTimeout } from "../base/sleep.ts";
import { StoreUnavailableError } from "./errors.ts";
import type { Lease, LeaseEvent } from "./types.ts";
import { ResponseTooLargeError } from "./limits.ts";
import { VERSION } from "../base/version.ts";

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
 * `p`, or a {@link StoreUnavailableError} `WHAT timed out after Ns` when the store has not answered within
 * `ms`: a store that does not answer is unavailable (readiness and the error classes say so), whoever asked.
 */
export function withStoreTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return withTimeout(p, ms, () => new StoreUnavailableError(`${what} timed out after ${ms / 1000}s`));
}

/**
 * client-go's reflector backoff (what flanneld's informer uses for every list and watch restart): 800 ms
 * doubling to 30 s, jitter 1.0, reset after 2 minutes without a retry.
 */
export const CLIENT_GO_BACKOFF: Readonly<BackoffShape> = {
  minMs: 800,
  maxMs: 30_000,
  jitter: 1.0,
  resetAfterMs: 120_000,
};

/**
 * The watch loops' retry: the one {@link Backoff} in {@link CLIENT_GO_BACKOFF}'s shape, each retry and the
 * recovery reported.
 */
export class WatchRetry {
  readonly backoff: Backoff;
  #warn: Warn | undefined;

  /** `warn` receives the retry and recovery lines (default: `flanctl: LINE` on stderr). */
  constructor(warn?: Warn, shape: Readonly<BackoffShape> = CLIENT_GO_BACKOFF) {
    this.#warn = warn;
    this.backoff = new Backoff(shape);
  }

  #report(line: string): void {
    if (this.#warn) this.#warn(line);
    else stderrLine(`flanctl: ${line}`);
  }

  /** Reports `msg` (the connection works again after a failure) where the retry lines go, and resets. */
  recovered(msg: string): void {
    this.#report(msg);
    this.backoff.reset();
  }

  /** Reports `MSG; retrying in Ns`, sleeps that long (cut short by `signal`), then doubles. */
  async wait(msg: string, signal: AbortSignal): Promise<void> {
    await this.backoff.wait({
      signal,
      announce: (ms) => this.#report(`${msg}; retrying in ${(ms / 1000).toFixed(1)}s`),
    });
  }
}

/**
 * The User-Agent, built as client-go builds its default (`<command>/<version> (<os>/<arch>)`, without the
 * `kubernetes/<commit>` part that names client-go's own build): what managedFields and the audit log show (Kubernetes API and etcd).
 */
export function userAgent(): string {
  const arch = ({ x86_64: "amd64", aarch64: "arm64" } as Record<string, string>)[Deno.build.arch] ??
    Deno.build.arch;
  return `flanctl/v${VERSION} (${Deno.build.os}/${arch})`;
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
  /** The longest line (chars) allowed: a longer one cancels the body and throws ResponseTooLargeError. */
  maxLine = Infinity,
  /** Names the stream (and the knob that raises the cap) in that error. */
  what = "watch stream",
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
  const tooLong = (): never => {
    throw new ResponseTooLargeError(`${what}: a line is longer than ${maxLine} bytes (refused)`, "event");
  };
  // A BYOB read hands the buffer over to the stream and back (a new ArrayBuffer object, same memory).
  let chunk = new Uint8Array(byob ? JSON_LINES_CHUNK : 0);
  // The current line's pieces: joined only when its newline comes, so a long line is never re-flattened
  // on every chunk (built by `+=` and searched each time, a line at the cap grew the heap many times over:
  // docs/performance.md).
  let parts: string[] = [];
  let partLen = 0;
  const finish = (piece: string): string => {
    const line = parts.length ? parts.join("") + piece : piece;
    parts = [];
    partLen = 0;
    return line.trim();
  };
  try {
    while (true) {
      let bytes: Uint8Array | undefined;
      if (byob) {
        const r = await byob.read(chunk);
        if (r.done) return yield* lastLine<T>(finish(decoder.decode()));
        bytes = r.value;
        chunk = new Uint8Array(r.value.buffer);
      } else {
        const r = await plain!.read();
        if (r.done) return yield* lastLine<T>(finish(decoder.decode()));
        bytes = r.value;
      }
      const text = decoder.decode(bytes, { stream: true });
      let from = 0, nl: number;
      while ((nl = text.indexOf("\n", from)) >= 0) {
        if (partLen + nl - from > maxLine) tooLong();
        const line = finish(text.slice(from, nl));
        from = nl + 1;
        if (line) yield JSON.parse(line) as T;
      }
      if (from < text.length) {
        partLen += text.length - from;
        if (partLen > maxLine) tooLong();
        parts.push(text.slice(from));
      }
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    await reader.cancel().catch(() => {});
  }
}

/** The stream's last line when it did not end with a newline (as a JSON framer reads it). */
function* lastLine<T>(line: string): Generator<T> {
  if (line) yield JSON.parse(line) as T;
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
