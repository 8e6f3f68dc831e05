import { assert, assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { defaultMaxConns, handleRequest, serveHealth } from "./http.ts";
import { Metrics } from "./metrics.ts";

Deno.test("health server: healthz, readyz 503 until ready, Prometheus metrics", async () => {
  const m = new Metrics();
  let why: string | null = "subnet.env not written yet";
  const get = (p: string) => handleRequest("GET", p, m, () => why);
  assertEquals(get("/healthz").status, 200);
  const r = get("/readyz");
  assertEquals(r.status, 503);
  assertStringIncludes(r.body, "subnet.env");
  why = null;
  assertEquals(get("/readyz").status, 200);
  assertEquals(get("/readyz?verbose").status, 200);
  m.peers = 7;
  m.observeReconcile(0.003);
  const body = get("/metrics").body;
  assertStringIncludes(body, "# TYPE flanctl_peers gauge\nflanctl_peers 7\n");
  assertStringIncludes(body, 'flanctl_reconcile_duration_seconds_bucket{le="0.005"} 1\n');
  assertStringIncludes(body, "flanctl_reconcile_duration_seconds_count 1\n");
  assertEquals(get("/nope").status, 404);
  assertEquals(handleRequest("POST", "/healthz", m, () => null).status, 405);

  const srv = serveHealth("127.0.0.1", 0, m, () => null);
  try {
    const res = await fetch(`http://127.0.0.1:${srv.port}/readyz`);
    assertEquals(res.status, 200);
    assertEquals(await res.text(), "ok\n");
    const head = await fetch(`http://127.0.0.1:${srv.port}/metrics`, { method: "HEAD" });
    assertEquals(head.status, 200);
    await head.body?.cancel();
  } finally {
    await srv.close();
  }
});

async function closedWithin(c: Deno.Conn, ms: number): Promise<boolean> {
  const buf = new Uint8Array(64);
  const t0 = Date.now();
  try {
    while (Date.now() - t0 < ms) {
      const n = await Promise.race([
        c.read(buf),
        new Promise<"wait">((r) => setTimeout(() => r("wait"), ms)),
      ]);
      if (n === null) return true;
      if (n === "wait") return false;
    }
  } catch {
    return true; // reset
  }
  return false;
}

Deno.test("health server: slow and idle connections are closed; a full table evicts the oldest", async () => {
  const m = new Metrics();
  const srv = serveHealth("127.0.0.1", 0, m, () => null, { maxConns: 4, headerTimeoutMs: 300 });
  const conns: Deno.Conn[] = [];
  try {
    // Slowloris: a request line, then a header byte now and then, never the blank line.
    const slow = await Deno.connect({ hostname: "127.0.0.1", port: srv.port });
    conns.push(slow);
    await slow.write(new TextEncoder().encode("GET /healthz HTTP/1.1\r\nX: "));
    const drip = setInterval(() => slow.write(new TextEncoder().encode("a")).catch(() => {}), 50);
    try {
      assert(await closedWithin(slow, 3_000), "slowloris connection closed after the header timeout");
    } finally {
      clearInterval(drip);
    }
    // Idle connections beyond the cap: the server keeps answering.
    for (let i = 0; i < 10; i++) conns.push(await Deno.connect({ hostname: "127.0.0.1", port: srv.port }));
    const res = await fetch(`http://127.0.0.1:${srv.port}/healthz`);
    assertEquals(res.status, 200);
    await res.body?.cancel();
    // An oversized head is refused.
    const big = await Deno.connect({ hostname: "127.0.0.1", port: srv.port });
    conns.push(big);
    await big.write(new TextEncoder().encode("GET /healthz HTTP/1.1\r\nX: " + "a".repeat(9000))).catch(
      () => {},
    );
    const buf = new Uint8Array(200);
    const n = await big.read(buf).catch(() => null);
    if (n) assertStringIncludes(new TextDecoder().decode(buf.subarray(0, n)), "431");
  } finally {
    for (const c of conns) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    await srv.close();
  }
});

Deno.test("health server: accept errors (EMFILE) are logged once and the server keeps serving", async () => {
  const real = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let failures = 5;
  const flaky = {
    addr: real.addr,
    accept: () =>
      failures-- > 0 ? Promise.reject(new Error("Too many open files (os error 24)")) : real.accept(),
    close: () => real.close(),
  } as unknown as Deno.Listener;
  const errors: string[] = [];
  const srv = serveHealth("127.0.0.1", 0, new Metrics(), () => null, {
    listener: flaky,
    onError: (_m, e) => errors.push(e),
  });
  try {
    const res = await fetch(`http://127.0.0.1:${srv.port}/healthz`);
    assertEquals(res.status, 200);
    await res.body?.cancel();
    assertEquals(errors.length, 1, `reported once: ${JSON.stringify(errors)}`);
    assertStringIncludes(errors[0], "Too many open files");
  } finally {
    await srv.close();
  }
  assertEquals(defaultMaxConns(null), 32);
  assertEquals(defaultMaxConns(64), 16);
  assertEquals(defaultMaxConns(8), 4);
  assertEquals(defaultMaxConns(1_048_576), 256);
  assertEquals(defaultMaxConns(20_000), 256);
  assertEquals(defaultMaxConns(400), 100);
});
