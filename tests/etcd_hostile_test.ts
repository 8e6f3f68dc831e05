/**
 * The etcd client and store against a hostile etcd JSON gateway (issue 30, "every etcd response is
 * bounded"): a 100 MB range answer and a 100 MB watch line are refused at the cap with the process's peak
 * RSS under 200 MiB (measured in a child process), endless `more` pages stop at the page cap, a watch
 * answered with a compaction every time is retried with backoff (a handful of requests in 10 s), a silent
 * watch is abandoned after the idle timeout and opened again.
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "./assert.ts";
import { EtcdClient } from "../lib/store/etcd/etcd_client.ts";
import { ETCD_LIMITS, ResponseTooLargeError } from "../lib/store/limits.ts";
import { EtcdStore } from "../lib/store/etcd/etcd.ts";
import { ROOT } from "./netns.ts";

const MiB = 1024 * 1024;

/** A body of `head`, `unit` repeated to `total` bytes, then `tail`, generated as read. */
function streamed(head: string, unit: string, tail: string, total: number): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  const block = enc.encode(unit.repeat(Math.max(1, Math.floor(MiB / unit.length))));
  let sent = 0, stage = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (stage === 0) {
        c.enqueue(enc.encode(head));
        stage = 1;
      } else if (stage === 1) {
        c.enqueue(block);
        sent += block.length;
        if (sent >= total) stage = 2;
      } else {
        c.enqueue(enc.encode(tail));
        c.close();
      }
    },
  });
}

/** A fake etcd gateway answering each path with `handler`; counts requests by path. */
function fakeEtcd(handler: (path: string, body: Record<string, unknown>) => Response) {
  const counts = new Map<string, number>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const path = new URL(req.url).pathname;
    counts.set(path, (counts.get(path) ?? 0) + 1);
    const body = await req.json().catch(() => ({}));
    return handler(path, body);
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, counts, close: () => server.shutdown() };
}

const kv = (i: number) => ({
  key: btoa(`/coreos.com/network/subnets/10.5.${i & 255}.0-24`),
  value: btoa(JSON.stringify({ PublicIP: "10.0.0.1", BackendType: "vxlan" })),
  create_revision: "2",
  mod_revision: "2",
});

Deno.test("etcd hostile: a 100 MB range answer and a 100 MB watch line are refused; peak RSS < 200 MiB", async () => {
  const srv = fakeEtcd((path) => {
    if (path === "/v3/kv/range") {
      return new Response(
        streamed(
          `{"header":{"revision":"5"},"kvs":[`,
          `${JSON.stringify(kv(1))},`,
          `${JSON.stringify(kv(2))}]}`,
          100 * MiB,
        ),
      );
    }
    if (path === "/v3/watch") {
      return new Response(streamed(`{"result":{"events":[{"kv":{"key":"`, "QUFB", `"}}]}}\n`, 100 * MiB));
    }
    return Response.json({});
  });
  try {
    // In a child process, so its VmHWM is the client's alone.
    const script = `
      import { EtcdClient } from ${JSON.stringify(`${ROOT}lib/store/etcd/etcd_client.ts`)};
      const c = new EtcdClient({ endpoints: [${JSON.stringify(srv.url)}] });
      const out = {};
      try { await c.range("/coreos.com/network/subnets/", "x"); out.range = "ok"; } catch (e) { out.range = e.constructor.name + ": " + e.message; }
      try { for await (const _ of c.watch("/a", "x", 1, new AbortController().signal)) {} out.watch = "ended"; } catch (e) { out.watch = e.constructor.name + ": " + e.message; }
      const st = Deno.readTextFileSync("/proc/self/status");
      out.hwm = Number(/^VmHWM:\\s+(\\d+)/m.exec(st)[1]) / 1024;
      c.close();
      console.log(JSON.stringify(out));
    `;
    const o = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-check", script],
      env: { FLANCTL_TEST_PREFIX: Deno.env.get("FLANCTL_TEST_PREFIX") ?? "" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(o.stdout).trim();
    assert(o.success, new TextDecoder().decode(o.stderr));
    const r = JSON.parse(text) as { range: string; watch: string; hwm: number };
    assertStringIncludes(r.range, "ResponseTooLargeError");
    assertStringIncludes(r.range, `larger than ${ETCD_LIMITS.maxBodyBytes} bytes`);
    assertStringIncludes(r.watch, "ResponseTooLargeError");
    assertStringIncludes(r.watch, "a line is longer than");
    assert(r.hwm < 200, `VmHWM ${r.hwm} MiB`);
    console.log(`etcd hostile: client VmHWM ${r.hwm.toFixed(1)} MiB`);
  } finally {
    await srv.close();
  }
});

Deno.test("etcd hostile: endless `more` pages stop at the page cap", async () => {
  let n = 0;
  const srv = fakeEtcd(() => Response.json({ header: { revision: "5" }, kvs: [kv(n++)], more: true }));
  const c = new EtcdClient({ endpoints: [srv.url] });
  try {
    const e = await assertRejects(() => c.range("/coreos.com/network/subnets/", "x"), ResponseTooLargeError);
    assertStringIncludes(e.message, "more than 100 pages");
    assertEquals(srv.counts.get("/v3/kv/range"), 100);
  } finally {
    c.close();
    await srv.close();
  }
});

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
