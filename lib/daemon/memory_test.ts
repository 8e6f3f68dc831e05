import { assertEquals } from "../../tests/assert.ts";
import { Logger } from "../base/log.ts";
import { fullGarbageCollection, MemoryRelease, TRIM_DELAY_MS, TRIM_MAX_WAIT_MS } from "./memory.ts";

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A MemoryRelease whose GC, trim and binary-pages hooks record their calls, in order. */
function recorded(): { calls: string[]; m: MemoryRelease } {
  const calls: string[] = [];
  const log = new Logger({ sink: () => {}, time: false });
  const m = new MemoryRelease({
    releaseMemory: () => calls.push("trim"),
    collectGarbage: () => calls.push("gc"),
    releaseBinaryPages: () => calls.push("binary"),
  }, log);
  return { calls, m };
}

Deno.test("MemoryRelease: one GC, trim and pages drop after each burst (debounced), none after stop", async () => {
  const { calls, m } = recorded();
  m.afterBurst();
  m.afterBurst();
  m.afterBurst(); // debounced into the same release
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls, ["gc", "trim", "binary"], "one release for the burst, the GC before the trim");
  m.afterBurst();
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls, ["gc", "trim", "binary", "gc", "trim", "binary"], "a small burst: the same release");
  m.afterBurst();
  m.stop();
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls.length, 6, "nothing after stop");
});

Deno.test("fullGarbageCollection: V8's gc asked for a synchronous last-resort major GC; none without gc", () => {
  const seen: unknown[] = [];
  const hook = fullGarbageCollection({ gc: (o?: unknown) => seen.push(o) });
  hook!();
  assertEquals(seen, [{ type: "major", execution: "sync", flavor: "last-resort" }]);
  assertEquals(fullGarbageCollection({}), undefined);
});

Deno.test("MemoryRelease.now: releases at once with the binary's pages, folds a pending release into it; nothing after stop", async () => {
  const { calls, m } = recorded();
  m.afterBurst();
  m.now();
  assertEquals(calls, ["gc", "trim", "binary"], "synchronous");
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls, ["gc", "trim", "binary"], "the pending release was folded into it");
  m.stop();
  m.now();
  assertEquals(calls.length, 3, "nothing after stop");
});

Deno.test("MemoryRelease: the binary's pages at idle releases, not before a pass nor in a burst going on", async () => {
  const { calls, m } = recorded();
  m.afterBurst();
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls, ["gc", "trim", "binary"], "idle after a burst: the binary's pages too");
  calls.length = 0;
  m.afterBurst();
  m.releasePending();
  assertEquals(calls, ["gc", "trim"], "before a pass: not the pages the pass runs");
  calls.length = 0;
  // A burst past TRIM_MAX_WAIT_MS whose last event comes after its release was forced (~TRIM_DELAY_MS after the
  // last event that re-armed it): the forced release keeps the pages; another follows once quiet, with them.
  const t0 = performance.now();
  while (performance.now() - t0 < TRIM_MAX_WAIT_MS) {
    m.afterBurst();
    await wait(50);
  }
  await wait(300);
  m.afterBurst(); // the burst's last event, ~650 ms before the forced release
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls, ["gc", "trim", "gc", "trim", "binary"]);
  m.stop();
});

Deno.test("MemoryRelease: a long burst is released at least every TRIM_MAX_WAIT_MS + TRIM_DELAY_MS", async () => {
  const calls: string[] = [];
  const log = new Logger({ sink: () => {}, time: false });
  const m = new MemoryRelease({ releaseMemory: () => calls.push("trim") }, log);
  const t0 = performance.now();
  while (performance.now() - t0 < TRIM_MAX_WAIT_MS + TRIM_DELAY_MS + 500) {
    m.afterBurst();
    await wait(50);
  }
  m.stop();
  assertEquals(calls.length >= 1, true, "released during the burst");
});

Deno.test("MemoryRelease.releasePending: a pending release runs now; none pending, nothing", () => {
  const calls: string[] = [];
  const log = new Logger({ sink: () => {}, time: false });
  const m = new MemoryRelease({ releaseMemory: () => calls.push("trim") }, log);
  m.releasePending();
  assertEquals(calls, [], "nothing pending");
  m.afterBurst();
  m.releasePending();
  assertEquals(calls, ["trim"]);
  m.releasePending();
  assertEquals(calls, ["trim"], "not twice");
  m.stop();
});
