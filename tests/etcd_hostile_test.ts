/**
 * The etcd store against a hostile etcd JSON gateway (issue 30): a watch answered with a compaction every
 * time is retried with backoff (a handful of requests in 10 s), a silent watch is abandoned after the idle
 * timeout and opened again. It waits on the real backoff (~30 s), longer than the whole unit tier, so it
 * stays out of it; the other hostile-gateway tests: lib/store/etcd/etcd_hostile_test.ts.
 */
import { assert } from "./assert.ts";
import { ETCD_LIMITS } from "../lib/store/limits.ts";
import { EtcdStore } from "../lib/store/etcd/etcd.ts";
import { fakeEtcd } from "./etcd_fake.ts";

Deno.test("etcd hostile: every watch compacted is retried with backoff; a silent watch is abandoned", async () => {
  let silent = false;
  const held: ReadableStreamDefaultController<Uint8Array>[] = [];
  const srv = fakeEtcd((path) => {
    if (path === "/v3/kv/range") return Response.json({ header: { revision: "5" } });
    if (path === "/v3/watch") {
      if (silent) return new Response(new ReadableStream({ start: (c) => void held.push(c) }));
      return new Response(
        JSON.stringify({ result: { header: { revision: "9" }, compact_revision: "8", canceled: true } }) +
          "\n",
      );
    }
    return Response.json({});
  });
  const warned: string[] = [];
  const store = new EtcdStore({
    endpoints: [srv.url],
    prefix: "/coreos.com/network",
    warn: (l) => warned.push(l),
    limits: { ...ETCD_LIMITS, watchTimeoutSec: 1 },
  });
  const ac = new AbortController();
  const run = (async () => {
    for await (const _ of store.watchLeases("5", ac.signal)) { /* no leases */ }
  })();
  try {
    await new Promise((r) => setTimeout(r, 10_000));
    const watches = srv.counts.get("/v3/watch") ?? 0, ranges = srv.counts.get("/v3/kv/range") ?? 0;
    // client-go's backoff (0.8 s doubling, jittered): 0.8-1.6, 1.6-3.2, 3.2-6.4 s … at most ~5 cycles.
    assert(watches <= 6 && ranges <= 6, `${watches} watches, ${ranges} ranges in 10 s\n${warned.join("\n")}`);
    assert(watches >= 2, `${watches} watches`);
    assert(warned.some((w) => w.includes("compacted")), warned.join("\n"));
    silent = true;
    await waitUntil(() => held.length >= 1, 60_000);
    await waitUntil(() => held.length >= 2, 30_000);
    assert(warned.some((w) => w.includes("silent for 1s: abandoned")), warned.join("\n"));
  } finally {
    ac.abort();
    for (const h of held) {
      try {
        h.close();
      } catch { /* closed */ }
    }
    await run.catch(() => {});
    await store.close();
    await srv.close();
  }
});

async function waitUntil(f: () => boolean, ms: number): Promise<void> {
  const t0 = Date.now();
  while (!f()) {
    if (Date.now() - t0 > ms) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
}
