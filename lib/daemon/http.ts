/**
 * The health and metrics server: `/healthz` (200 while the process serves), `/readyz` (200 once the
 * rules are in place and subnet.env is written, 503 before that and while the store is unreachable) and
 * `/metrics` (Prometheus text). Built on Deno.serve; nothing else is needed.
 * @module
 */
import type { Metrics } from "./metrics.ts";

/** Why the daemon is not ready, or null when it is. */
export type ReadinessFn = () => string | null;

/** Handles one request (exported for tests). */
export function handleRequest(req: Request, metrics: Metrics, notReady: ReadinessFn): Response {
  const path = new URL(req.url).pathname;
  const text = (body: string, status = 200, type = "text/plain; charset=utf-8") =>
    new Response(body, { status, headers: { "content-type": type } });
  if (req.method !== "GET" && req.method !== "HEAD") return text("method not allowed\n", 405);
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

/** Starts the server on `hostname:port`. */
export function serveHealth(
  hostname: string,
  port: number,
  metrics: Metrics,
  notReady: ReadinessFn,
): HealthServer {
  const ac = new AbortController();
  let bound = port;
  const server = Deno.serve(
    { hostname, port, signal: ac.signal, onListen: (a) => (bound = (a as Deno.NetAddr).port) },
    (req) => handleRequest(req, metrics, notReady),
  );
  return {
    get port() {
      return bound;
    },
    async close() {
      ac.abort();
      await server.finished.catch(() => {});
    },
  };
}
