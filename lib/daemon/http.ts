/**
 * The health and metrics server: `/healthz` (200 while the process serves), `/readyz` (200 once the
 * rules are in place, subnet.env is written and the node holds a valid lease; 503 otherwise) and
 * `/metrics` (Prometheus text).
 *
 * Why a hand-written HTTP/1.1 responder over `Deno.listen` instead of `Deno.serve`: the port is reachable
 * from the network (flanneld's default address is 0.0.0.0), and Deno.serve has no knob for a connection
 * cap, a header timeout or an idle timeout, and an accept failure (EMFILE) inside it rejects a promise we
 * cannot catch, which ends the process. Three GET endpoints need a request line and nothing else, so the
 * responder is small: one request per connection (`Connection: close`), the request head must arrive
 * within `headerTimeoutMs` and fit in 8 KiB, at most `maxConns` connections are open (when full, the
 * requests that arrived are read first, then the oldest still waiting for its request is closed), and accept errors are logged once per change and retried with backoff. Nothing the server
 * does can throw out of it, so it can neither end the daemon nor hold the event loop the reconciler runs on.
 * @module
 */
import { readCappedText } from "../base/capped_read.ts";
import { errText } from "../base/errors.ts";
import { Backoff } from "../base/backoff.ts";
import type { Metrics } from "./metrics.ts";

/** Why the daemon is not ready, or null when it is. */
export type ReadinessFn = () => string | null;

/** A response to write. */
export interface HealthResponse {
  status: number;
  type: string;
  body: string;
}

/** Handles one request (exported for tests). */
export function handleRequest(
  method: string,
  target: string,
  metrics: Metrics,
  notReady: ReadinessFn,
): HealthResponse {
  const text = (body: string, status = 200, type = "text/plain; charset=utf-8") => ({ status, type, body });
  if (method !== "GET" && method !== "HEAD") return text("method not allowed\n", 405);
  const q = target.indexOf("?");
  const path = q < 0 ? target : target.slice(0, q);
  switch (path) {
    case "/healthz":
      return text("ok\n");
    case "/readyz": {
      const why = notReady();
      return why === null ? text("ok\n") : text(`not ready: ${why}\n`, 503);
    }
    case "/metrics":
      return text(metrics.render(), 200, "text/plain; version=0.0.4; charset=utf-8");
    default:
      return text("not found (try /healthz, /readyz, /metrics)\n", 404);
  }
}

/** A running server; `close()` stops it. */
export interface HealthServer {
  /** The bound port (useful with port 0 in tests). */
  port: number;
  close(): Promise<void>;
}

/** Limits of the health server. */
export interface HealthServerOptions {
  /** Most connections open at once (default {@link defaultMaxConns}); see {@link serveHealth}'s module doc. */
  maxConns?: number;
  /** The whole request head must arrive within this (default 5 s); then the connection is closed. */
  headerTimeoutMs?: number;
  /** Writing the response must finish within this (default 5 s). */
  writeTimeoutMs?: number;
  /** Where accept errors are reported (once per distinct error). */
  onError?: (msg: string, error: string) => void;
  /** An already bound listener to serve on instead of `hostname:port` (tests wrap one to inject errors). */
  listener?: Deno.Listener;
}

/** The soft RLIMIT_NOFILE of this process, from /proc/self/limits; null when unknown. */
export function openFileLimit(): number | null {
  try {
    const t = readCappedText("/proc/self/limits", 64 * 1024);
    const m = /^Max open files\s+(\d+)/m.exec(t);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/**
 * Default connection cap: 256, or a quarter of a lower fd limit (32 when unknown), so the health port can
 * never use them up. 256 rather than 32: under a flood reconnecting as fast as it is closed, a connection
 * lives about cap ÷ accept rate before it is the oldest, and a probe whose client is slow to send its
 * request (a starved CPU) needs that time (docs/daemon.md). A connection waiting for its request costs a
 * descriptor and an 8 KiB buffer.
 */
export function defaultMaxConns(limit: number | null = openFileLimit()): number {
  return limit === null ? 32 : Math.max(4, Math.min(256, Math.floor(limit / 4)));
}

const MAX_HEAD = 8192;
const REASON: Record<number, string> = {
  200: "OK",
  400: "Bad Request",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  431: "Request Header Fields Too Large",
  503: "Service Unavailable",
};
const enc = new TextEncoder();
const dec = new TextDecoder();

/** Resolves after `ms` unless cancelled; returns the cancel function. */
function timer(ms: number, fn: () => void): () => void {
  const t = setTimeout(fn, ms);
  return () => clearTimeout(t);
}

/** Starts the server on `hostname:port` (throws when the address cannot be bound, like Deno.serve). */
export function serveHealth(
  hostname: string,
  port: number,
  metrics: Metrics,
  notReady: ReadinessFn,
  opts: HealthServerOptions = {},
): HealthServer {
  const limits: Limits = {
    maxConns: opts.maxConns ?? defaultMaxConns(),
    headerTimeout: opts.headerTimeoutMs ?? 5_000,
    writeTimeout: opts.writeTimeoutMs ?? 5_000,
    onError: opts.onError ?? (() => {}),
  };
  const listener = opts.listener ?? Deno.listen({ hostname, port, transport: "tcp" });
  const bound = (listener.addr as Deno.NetAddr).port;
  const server = new Responder(listener, metrics, notReady, limits);
  const loop = server.acceptLoop().catch((e) => limits.onError("health server stopped", errText(e)));
  return {
    port: bound,
    async close() {
      if (server.close()) await loop;
    },
  };
}

/** The request head of a connection (up to the blank line), or the status that refuses it. */
async function readHead(c: Deno.Conn): Promise<string | number> {
  const buf = new Uint8Array(MAX_HEAD);
  let len = 0;
  while (true) {
    const n = await c.read(buf.subarray(len));
    if (n === null) return 400;
    const start = Math.max(0, len - 3);
    len += n;
    for (let i = start; i + 3 < len; i++) {
      if (buf[i] === 13 && buf[i + 1] === 10 && buf[i + 2] === 13 && buf[i + 3] === 10) {
        return dec.decode(buf.subarray(0, i));
      }
    }
    for (let i = start; i + 1 < len; i++) {
      if (buf[i] === 10 && buf[i + 1] === 10) return dec.decode(buf.subarray(0, i)); // bare LF
    }
    if (len === MAX_HEAD) return 431;
  }
}

/** The response to a request head (or to the status that refused it), and the request's method. */
function respond(
  head: string | number,
  metrics: Metrics,
  notReady: ReadinessFn,
): { method: string; res: HealthResponse } {
  if (typeof head === "number") {
    return { method: "GET", res: { status: head, type: "text/plain; charset=utf-8", body: "" } };
  }
  const m = /^([A-Z]+) (\S+) HTTP\/1\.[01]\r?$/.exec(head.split("\n", 1)[0]);
  if (!m) {
    return { method: "GET", res: { status: 400, type: "text/plain; charset=utf-8", body: "bad request\n" } };
  }
  try {
    return { method: m[1], res: handleRequest(m[1], m[2], metrics, notReady) };
  } catch (e) {
    return {
      method: m[1],
      res: { status: 503, type: "text/plain; charset=utf-8", body: `error: ${errText(e)}\n` },
    };
  }
}

/** The bytes of a response: status line, headers, and the body unless the request was HEAD. */
function encodeResponse(res: HealthResponse, method: string): Uint8Array {
  const body = enc.encode(res.body);
  const out = enc.encode(
    `HTTP/1.1 ${res.status} ${REASON[res.status] ?? "Error"}\r\ncontent-type: ${res.type}\r\n` +
      `content-length: ${body.length}\r\nconnection: close\r\n\r\n`,
  );
  const all = new Uint8Array(out.length + (method === "HEAD" ? 0 : body.length));
  all.set(out);
  if (method !== "HEAD") all.set(body, out.length);
  return all;
}

/** The limits a {@link Responder} applies (the options of {@link serveHealth} with their defaults). */
interface Limits {
  maxConns: number;
  headerTimeout: number;
  writeTimeout: number;
  onError: (msg: string, error: string) => void;
}

/** The accept loop and the connections it serves: one request per connection, within the limits. */
class Responder {
  /** Open connections, oldest first (a Set keeps insertion order). */
  readonly #open = new Set<Deno.Conn>();
  /** Those of them whose request head has arrived (being answered: never evicted for a newer one). */
  readonly #answering = new Set<Deno.Conn>();
  #closed = false;
  #channel: MessageChannel | null = null;
  #wakeTurn: (() => void) | null = null;
  #wakeBackoff: (() => void) | null = null;

  constructor(
    readonly listener: Deno.Listener,
    readonly metrics: Metrics,
    readonly notReady: ReadinessFn,
    readonly limits: Limits,
  ) {}

  /** Accepts until closed; accept errors are reported once per change and retried with backoff. */
  async acceptLoop(): Promise<void> {
    let lastErr = "";
    const backoff = new Backoff({ minMs: 50, maxMs: 1_000 });
    while (!this.#closed) {
      let c: Deno.Conn;
      try {
        c = await this.listener.accept();
      } catch (e) {
        if (this.#closed) break;
        // EMFILE/ENFILE/ENOBUFS and the like: the pending connection stays queued; wait and try again.
        const msg = errText(e);
        if (msg !== lastErr) {
          this.limits.onError("health server: accepting a connection failed; retrying", msg);
        }
        lastErr = msg;
        await backoff.wait({ sleep: (ms) => this.#sleep(ms) });
        continue;
      }
      lastErr = "";
      backoff.reset();
      if (this.#open.size >= this.limits.maxConns) {
        // Full: first one event-loop turn, in which the requests that have arrived (a probe sends its own
        // at once) are read, so a connection being answered is not the one evicted; then the oldest of
        // those still waiting for their request goes. (Evicting at once let a flood of new connections
        // push a probe's out before its request was read: docs/daemon.md.)
        await this.#turn();
        if (this.#closed) {
          this.#drop(c);
          break;
        }
        this.#evict();
      }
      this.#open.add(c);
      this.#serve(c).catch(() => {}).finally(() => this.#drop(c));
    }
  }

  /**
   * Resolves after one turn of the event loop, in which I/O that is ready (a connection's request) is
   * delivered: a message to ourselves through a MessageChannel (a timer of 0 ms waits a clock tick instead).
   */
  #turn(): Promise<void> {
    if (!this.#channel) {
      this.#channel = new MessageChannel();
      this.#channel.port1.onmessage = () => this.#wakeTurn?.();
    }
    const ch = this.#channel;
    return new Promise<void>((r) => {
      this.#wakeTurn = r;
      ch.port2.postMessage(0);
    });
  }

  /** Stops accepting and closes every connection; false when it was already closed. */
  close(): boolean {
    if (this.#closed) return false;
    this.#closed = true;
    try {
      this.listener.close();
    } catch { /* already closed */ }
    this.#wakeBackoff?.();
    this.#channel?.port1.close();
    this.#channel?.port2.close();
    this.#wakeTurn?.();
    for (const c of [...this.#open]) this.#drop(c);
    return true;
  }

  /** The accept backoff: `ms`, cut short by {@link close}. */
  async #sleep(ms: number): Promise<void> {
    await new Promise<void>((r) => {
      const cancel = timer(ms, r);
      this.#wakeBackoff = () => {
        cancel();
        r();
      };
    });
    this.#wakeBackoff = null;
  }

  /** Closes the oldest connection still waiting for its request (the oldest of all when every one is answered). */
  #evict(): void {
    for (const c of this.#open) {
      if (!this.#answering.has(c)) return this.#drop(c);
    }
    const oldest = this.#open.values().next();
    if (!oldest.done) this.#drop(oldest.value);
  }

  #drop(c: Deno.Conn): void {
    this.#answering.delete(c);
    if (!this.#open.delete(c)) return;
    try {
      c.close();
    } catch { /* already closed */ }
  }

  /** One connection: its request head within the header timeout, then the response within the write timeout. */
  async #serve(c: Deno.Conn): Promise<void> {
    let timedOut = false;
    const cancelHead = timer(this.limits.headerTimeout, () => {
      timedOut = true;
      this.#drop(c);
    });
    let head: string | number;
    try {
      head = await readHead(c);
    } catch {
      return; // closed by the timeout, eviction or the peer
    } finally {
      cancelHead();
    }
    if (timedOut || !this.#open.has(c)) return;
    this.#answering.add(c);
    const { method, res } = respond(head, this.metrics, this.notReady);
    await this.#write(c, encodeResponse(res, method));
  }

  async #write(c: Deno.Conn, all: Uint8Array): Promise<void> {
    const cancelWrite = timer(this.limits.writeTimeout, () => this.#drop(c));
    try {
      let off = 0;
      while (off < all.length && this.#open.has(c)) off += await c.write(all.subarray(off));
    } catch {
      /* peer went away */
    } finally {
      cancelWrite();
    }
  }
}
