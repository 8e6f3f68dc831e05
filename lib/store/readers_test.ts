/**
 * The bounded readers of API and etcd responses: the streamed list scanner (lib/store/json_list.ts) gives
 * the same items and fields as JSON.parse however the text is cut into chunks (escapes, quotes and nested
 * `items` keys included) and refuses what breaks a cap; the watch line reader refuses a line over its cap and
 * reads a last line without a newline; the watch backoff is client-go's (jittered, doubling, capped, reset).
 */
import { assert, assertEquals, assertRejects, assertThrows } from "../../tests/assert.ts";
import { JsonListScanner, readJsonList } from "./kube/json_list.ts";
import { ResponseTooLargeError } from "./limits.ts";
import { StoreError } from "./errors.ts";
import { jsonLines, WatchRetry } from "./util.ts";

const TRICKY = [
  '"',
  "\\",
  '\\"',
  "\\\\",
  "items",
  "]",
  "}",
  "{[",
  "é€😀",
  "a\nb",
  "\\u0041",
  "",
  '},{"metadata":',
  '\\},{"metadata":',
];

function randomValue(depth: number, r: () => number): unknown {
  const k = Math.floor(r() * (depth > 3 ? 4 : 7));
  if (k === 0) return TRICKY[Math.floor(r() * TRICKY.length)] + TRICKY[Math.floor(r() * TRICKY.length)];
  if (k === 1) return Math.floor(r() * 1e6) / 7;
  if (k === 2) return r() < 0.5 ? null : r() < 0.5;
  if (k === 3) return "plain";
  if (k === 4 && r() < 0.5) {
    // As an apiserver writes items: metadata first; nested lists of such objects too.
    return {
      metadata: randomValue(depth + 1, r),
      spec: [{ metadata: 1 }, { metadata: randomValue(depth + 1, r) }],
    };
  }
  if (k <= 5) {
    const o: Record<string, unknown> = {};
    for (let i = 0; i < 4; i++) o[TRICKY[Math.floor(r() * TRICKY.length)] + i] = randomValue(depth + 1, r);
    if (r() < 0.3) o.items = [randomValue(depth + 1, r)];
    return o;
  }
  return Array.from({ length: 3 }, () => randomValue(depth + 1, r));
}

function seeded(seed: number): () => number {
  return () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
}

const caps = { maxBodyBytes: 1e9, maxItemBytes: 1e6, maxItems: 1000, what: "test list" };

function scan(text: string, cut: (i: number) => number, c = caps): { items: unknown[]; top: unknown } {
  const items: unknown[] = [];
  const s = new JsonListScanner(c, (x) => items.push(x));
  for (let i = 0; i < text.length;) {
    const n = Math.max(1, cut(i));
    s.push(text.slice(i, i + n));
    i += n;
  }
  return { items, top: s.finish() };
}

Deno.test("list scanner: items and fields as JSON.parse gives them, however the text is chunked", () => {
  const r = seeded(7);
  for (let t = 0; t < 400; t++) {
    const items = Array.from(
      { length: Math.floor(r() * 5) },
      () => t % 2 ? { metadata: randomValue(2, r), status: randomValue(2, r) } : randomValue(1, r),
    );
    const list = { kind: "NodeList", metadata: { resourceVersion: "9", continue: '\\"x' }, items, z: [1] };
    const text = JSON.stringify(list, null, t % 3 === 0 ? 1 : 0);
    const sizes = [1, 2, 3, 5, 64, 1e9];
    for (const size of sizes) {
      const got = scan(text, () => size);
      assertEquals(JSON.stringify(got.items), JSON.stringify(items), `case ${t}, chunks of ${size}`);
      const { items: _, ...rest } = list;
      assertEquals(got.top, { ...rest, items: items.map(() => 0) });
    }
    const random = scan(text, () => Math.floor(r() * 9));
    assertEquals(JSON.stringify(random.items), JSON.stringify(items));
  }
});

Deno.test("list scanner: caps and malformed input", async () => {
  const big = JSON.stringify({ items: [{ a: "x".repeat(100) }] });
  const e1 = assertThrows(() => scan(big, () => 7, { ...caps, maxItemBytes: 50 }), ResponseTooLargeError);
  assertEquals((e1 as ResponseTooLargeError).cap, "event");
  const many = JSON.stringify({ items: [1, 2, 3, 4] });
  const e2 = assertThrows(() => scan(many, () => 3, { ...caps, maxItems: 3 }), ResponseTooLargeError);
  assertEquals((e2 as ResponseTooLargeError).cap, "items");
  const fat = JSON.stringify({ metadata: { x: "y".repeat(100) }, items: [] });
  assertThrows(() => scan(fat, () => 3, { ...caps, maxItemBytes: 50 }), ResponseTooLargeError);
  for (const bad of ["[1]", '{"items":[1]', '{"items":[1]} x', '{"items":[{]}', "{}}"]) {
    assertThrows(() => scan(bad, () => 2), StoreError);
  }
  // The body cap: an endless body is cancelled at the cap.
  let pulled = 0;
  const endless = new ReadableStream<Uint8Array>({
    pull(c) {
      pulled++;
      c.enqueue(new TextEncoder().encode(pulled === 1 ? '{"items":[' : '{"a":1},'.repeat(1000)));
    },
  });
  const e3 = await assertRejects(
    () => readJsonList(endless, { ...caps, maxBodyBytes: 100_000, maxItems: 1e9 }, () => {}),
    ResponseTooLargeError,
  );
  assertEquals((e3 as ResponseTooLargeError).cap, "body");
  assert(pulled < 20, `${pulled} chunks read`);
});

function body(...parts: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const p of parts) c.enqueue(enc.encode(p));
      c.close();
    },
  });
}

Deno.test("watch lines: a line over the cap is refused; a last line without a newline is read", async () => {
  const got: unknown[] = [];
  for await (const x of jsonLines(body('{"a":1}\n{"b"', ':2}\n\n{"c":3}'), undefined, 100)) got.push(x);
  assertEquals(got, [{ a: 1 }, { b: 2 }, { c: 3 }]);
  const e = await assertRejects(async () => {
    for await (const _ of jsonLines(body('{"a":"', "x".repeat(60), "x".repeat(60), '"}\n'), undefined, 100)) {
      // nothing
    }
  }, ResponseTooLargeError);
  assertEquals((e as ResponseTooLargeError).cap, "event");
});

Deno.test("watch backoff: client-go's 0.8 s doubling to 30 s, jitter up to 2x, reset after 2 min", async () => {
  const b = new WatchRetry(() => {}).backoff;
  const bases = [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000];
  for (const base of bases) {
    const ms = b.next();
    assert(ms >= base && ms <= 2 * base, `${ms} for base ${base}`);
  }
  const d = new WatchRetry(() => {}, { minMs: 100, maxMs: 1000, jitter: 0, resetAfterMs: 60_000 }).backoff;
  assertEquals([d.next(), d.next(), d.next(), d.next(), d.next(), d.next()], [
    100,
    200,
    400,
    800,
    1000,
    1000,
  ]);
  const r = new WatchRetry(() => {}, { minMs: 100, maxMs: 1000, jitter: 0, resetAfterMs: 0 }).backoff;
  assertEquals(r.next(), 100);
  await new Promise((res) => setTimeout(res, 5));
  assertEquals(r.next(), 100); // the last retry is "long ago" (resetAfterMs 0): back to the first delay
});

Deno.test("watch retry: each wait reports the delay it sleeps; a recovery is reported and starts over", async () => {
  const lines: string[] = [];
  const w = new WatchRetry((l) => lines.push(l), { minMs: 100, maxMs: 400, jitter: 0, resetAfterMs: 60_000 });
  const stop = new AbortController();
  stop.abort(); // the sleeps end at once; the delays still grow
  await w.wait("etcd watch closed at once", stop.signal);
  await w.wait("etcd watch closed at once", stop.signal);
  w.recovered("etcd watch resumed");
  await w.wait("etcd re-list failed", stop.signal);
  assertEquals(lines, [
    "etcd watch closed at once; retrying in 0.1s",
    "etcd watch closed at once; retrying in 0.2s",
    "etcd watch resumed",
    "etcd re-list failed; retrying in 0.1s",
  ]);
});
