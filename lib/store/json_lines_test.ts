/**
 * The watch streams' line reader (lib/store/util.ts `jsonLines`) ends when its abort signal fires, also while
 * a read of a body that never ends is pending (the daemon hung on SIGTERM with 5,000 etcd peers when only
 * fetch's own signal was relied on to end that read); a byte stream (fetch's bodies) is read through a BYOB
 * reader into one 64 KiB buffer, lines and UTF-8 characters split across reads coming out whole.
 */
import { assertEquals } from "../../tests/assert.ts";
import { JSON_LINES_CHUNK, jsonLines } from "./util.ts";

/** Runs `fn`; "timed out" when it has not finished after 10 s. */
async function within10s<T>(p: Promise<T>): Promise<T | "timed out"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const v = await Promise.race([
    p,
    new Promise<"timed out">((r) => timer = setTimeout(() => r("timed out"), 10_000)),
  ]);
  clearTimeout(timer);
  return v;
}

/**
 * A byte stream handing out `parts` one per pull, then (`end`) closing or staying open for good. `reads`
 * records each pull: "byob VIEW_LENGTH" when the reader gave a buffer to fill, "default" when it did not.
 */
function byteStream(parts: Uint8Array[], end: "close" | "never") {
  const reads: string[] = [];
  let cancelled = false;
  const stream = new ReadableStream({
    type: "bytes",
    pull(c: ReadableByteStreamController) {
      const part = parts.shift();
      if (!part) {
        if (end === "close") {
          c.close();
          c.byobRequest?.respond(0);
        }
        return new Promise(() => {}); // pending until cancelled
      }
      const req = c.byobRequest;
      if (req?.view) {
        reads.push(`byob ${req.view.byteLength}`);
        new Uint8Array(req.view.buffer, req.view.byteOffset, req.view.byteLength).set(part);
        req.respond(part.length);
      } else {
        reads.push("default");
        c.enqueue(part);
      }
      return Promise.resolve();
    },
    cancel() {
      cancelled = true;
    },
  });
  return { stream, reads, cancelled: () => cancelled };
}

Deno.test("jsonLines: a byte stream is read through one BYOB buffer; split lines and characters come out whole", async () => {
  const bytes = new TextEncoder().encode('{"s":"é"}\n\n{"s":"€x"}\n{"n":3}\n');
  // Cuts inside é (2 bytes), inside € (3 bytes) and inside a line.
  const cuts = [7, 8, 19, 21, 28, bytes.length];
  const parts = cuts.map((c, i) => bytes.slice(i ? cuts[i - 1] : 0, c));
  const s = byteStream([...parts], "close");
  const got: unknown[] = [];
  const done = (async () => {
    for await (const m of jsonLines(s.stream)) got.push(m);
    return "ended";
  })();
  assertEquals(await within10s(done), "ended");
  assertEquals(got, [{ s: "é" }, { s: "€x" }, { n: 3 }]);
  assertEquals(s.reads, parts.map(() => `byob ${JSON_LINES_CHUNK}`));
});

Deno.test("jsonLines: an abort ends a pending BYOB read of an endless byte stream and cancels it", async () => {
  const s = byteStream([new TextEncoder().encode('{"a":1}\n')], "never");
  const ac = new AbortController();
  const got: unknown[] = [];
  const done = (async () => {
    for await (const m of jsonLines(s.stream, ac.signal)) {
      got.push(m);
      setTimeout(() => ac.abort(), 0); // abort while the next read is pending
    }
    return "ended";
  })();
  assertEquals(await within10s(done), "ended");
  assertEquals(got, [{ a: 1 }]);
  assertEquals(s.reads, [`byob ${JSON_LINES_CHUNK}`]);
  assertEquals(s.cancelled(), true, "the body was cancelled");
});

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
