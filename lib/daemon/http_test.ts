import { assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { handleRequest, serveHealth } from "./http.ts";
import { Metrics } from "./metrics.ts";

Deno.test("health server: healthz, readyz 503 until ready, Prometheus metrics", async () => {
  const m = new Metrics();
  let why: string | null = "subnet.env not written yet";
  const get = (p: string) => handleRequest(new Request(`http://x${p}`), m, () => why);
  assertEquals(get("/healthz").status, 200);
  const r = get("/readyz");
  assertEquals(r.status, 503);
  assertStringIncludes(await r.text(), "subnet.env");
  why = null;
  assertEquals(get("/readyz").status, 200);
  m.peers = 7;
  m.observeReconcile(0.003);
  const body = await get("/metrics").text();
  assertStringIncludes(body, "# TYPE flanctl_peers gauge\nflanctl_peers 7\n");
  assertStringIncludes(body, 'flanctl_reconcile_duration_seconds_bucket{le="0.005"} 1\n');
  assertStringIncludes(body, "flanctl_reconcile_duration_seconds_count 1\n");
  assertEquals(get("/nope").status, 404);

  const srv = serveHealth("127.0.0.1", 0, m, () => null);
  try {
    const res = await fetch(`http://127.0.0.1:${srv.port}/readyz`);
    assertEquals(res.status, 200);
    await res.body?.cancel();
  } finally {
    await srv.close();
  }
});
