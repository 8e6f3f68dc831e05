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
 * within `headerTimeoutMs` and fit in 8 KiB, at most `maxConns` connections are open (a new one evicts
 * the oldest), and accept errors are logged once per change and retried with backoff. Nothing the server
 * does can throw out of it, so it can neither end the daemon nor hold the event loop the reconciler runs on.
 * @module
 */
import { readCappedText } from "../capped_read.ts";
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
  /** Most connections open at once (default {@link defaultMaxConns}); a new one beyond it closes the oldest. */
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

/** Default connection cap: 32, or a quarter of a low fd limit, so the health port can never use them up. */
export function defaultMaxConns(limit: number | null = openFileLimit()): number {
  return limit === null ? 32 : Math.max(4, Math.min(32, Math.floor(limit / 4)));
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

function errText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

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
  const maxConns = opts.maxConns ?? defaultMaxConns();
  const headerTimeout = opts.headerTimeoutMs ?? 5_000;
  const writeTimeout = opts.writeTimeoutMs ?? 5_000;
  const onError = opts.onError ?? (() => {});
  const listener = opts.listener ?? Deno.listen({ hostname, port, transport: "tcp" });
  const bound = (listener.addr as Deno.NetAddr).port;
  /** Open connections, oldest first (a Set keeps insertion order). */
  const open = new Set<Deno.Conn>();
  let closed = false;
  let wakeBackoff: (() => void) | null = null;

  const drop = (c: Deno.Conn) => {
    if (!open.delete(c)) return;
    try {
      c.close();
    } catch { /* already closed */ }
  };

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

  async function serveConn(c: Deno.Conn): Promise<void> {
    let timedOut = false;
    const cancelHead = timer(headerTimeout, () => {
      timedOut = true;
      drop(c);
    });
    let head: string | number;
    try {
      head = await readHead(c);
    } catch {
      return; // closed by the timeout, eviction or the peer
    } finally {
      cancelHead();
    }
    if (timedOut || !open.has(c)) return;
    let method = "GET";
    let res: HealthResponse;
    if (typeof head === "number") res = { status: head, type: "text/plain; charset=utf-8", body: "" };
    else {
      const m = /^([A-Z]+) (\S+) HTTP\/1\.[01]\r?$/.exec(head.split("\n", 1)[0]);
      if (!m) res = { status: 400, type: "text/plain; charset=utf-8", body: "bad request\n" };
      else {
        method = m[1];
        try {
          res = handleRequest(method, m[2], metrics, notReady);
        } catch (e) {
          res = { status: 503, type: "text/plain; charset=utf-8", body: `error: ${errText(e)}\n` };
        }
      }
    }
    const body = enc.encode(res.body);
    const out = enc.encode(
      `HTTP/1.1 ${res.status} ${REASON[res.status] ?? "Error"}\r\ncontent-type: ${res.type}\r\n` +
        `content-length: ${body.length}\r\nconnection: close\r\n\r\n`,
    );
    const all = new Uint8Array(out.length + (method === "HEAD" ? 0 : body.length));
    all.set(out);
    if (method !== "HEAD") all.set(body, out.length);
    const cancelWrite = timer(writeTimeout, () => drop(c));
    try {
      let off = 0;
      while (off < all.length && open.has(c)) off += await c.write(all.subarray(off));
    } catch {
      /* peer went away */
    } finally {
      cancelWrite();
    }
  }

  async function acceptLoop(): Promise<void> {
    let lastErr = "";
    let backoff = 50;
    while (!closed) {
      let c: Deno.Conn;
      try {
        c = await listener.accept();
      } catch (e) {
        if (closed) break;
        // EMFILE/ENFILE/ENOBUFS and the like: the pending connection stays queued; wait and try again.
        const msg = errText(e);
        if (msg !== lastErr) onError("health server: accepting a connection failed; retrying", msg);
        lastErr = msg;
        await new Promise<void>((r) => {
          const cancel = timer(backoff, r);
          wakeBackoff = () => {
            cancel();
            r();
          };
        });
        wakeBackoff = null;
        backoff = Math.min(backoff * 2, 1_000);
        continue;
      }
      lastErr = "";
      backoff = 50;
      if (open.size >= maxConns) drop(open.values().next().value!);
      open.add(c);
      serveConn(c).catch(() => {}).finally(() => drop(c));
    }
  }

  const loop = acceptLoop().catch((e) => onError("health server stopped", errText(e)));
  return {
    port: bound,
    async close() {
      if (closed) return;
      closed = true;
      try {
        listener.close();
      } catch { /* already closed */ }
      wakeBackoff?.();
      for (const c of [...open]) drop(c);
      await loop;
    },
  };
}
