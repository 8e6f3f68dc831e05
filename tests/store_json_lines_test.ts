/**
 * The watch streams' line reader (lib/store/util.ts `jsonLines`) ends when its abort signal fires, also while
 * a read of a body that never ends is pending (the daemon hung on SIGTERM with 5,000 etcd peers when only
 * fetch's own signal was relied on to end that read).
 */
import { assertEquals } from "./assert.ts";
import { jsonLines } from "../lib/store/util.ts";

Deno.test("jsonLines: yields each JSON line, and an abort ends a pending read of an endless body", async () => {
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(new TextEncoder().encode('{"a":1}\n\n{"a"'));
      c.enqueue(new TextEncoder().encode(":2}\n"));
    }, // never closes, as a watch stream
    cancel() {
      cancelled = true;
    },
  });
  const ac = new AbortController();
  const got: unknown[] = [];
  const done = (async () => {
    for await (const m of jsonLines<{ a: number }>(body, ac.signal)) {
      got.push(m);
      if (got.length === 2) setTimeout(() => ac.abort(), 0); // abort while the next read is pending
    }
    return "ended";
  })();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const verdict = await Promise.race([
    done,
    new Promise<string>((r) => timer = setTimeout(() => r("still reading 10 s after the abort"), 10_000)),
  ]);
  clearTimeout(timer);
  assertEquals(verdict, "ended");
  assertEquals(got, [{ a: 1 }, { a: 2 }]);
  assertEquals(cancelled, true, "the body was cancelled");
});
