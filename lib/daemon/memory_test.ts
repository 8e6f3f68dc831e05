import { assertEquals } from "../../tests/assert.ts";
import { Logger } from "./log.ts";
import { fullGarbageCollection, MemoryRelease, TRIM_DELAY_MS } from "./memory.ts";

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("MemoryRelease: one GC then trim after each burst (debounced), none after stop", async () => {
  const calls: string[] = [];
  const log = new Logger({ sink: () => {}, time: false });
  const m = new MemoryRelease({
    releaseMemory: () => calls.push("trim"),
    collectGarbage: () => calls.push("gc"),
  }, log);
  m.afterBurst();
  m.afterBurst();
  m.afterBurst(); // debounced into the same release
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls, ["gc", "trim"], "one release for the burst, the GC before the trim");
  m.afterBurst();
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls, ["gc", "trim", "gc", "trim"], "a small burst: the same release");
  m.afterBurst();
  m.stop();
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls.length, 4, "nothing after stop");
});

Deno.test("fullGarbageCollection: V8's gc asked for a synchronous last-resort major GC; none without gc", () => {
  const seen: unknown[] = [];
  const hook = fullGarbageCollection({ gc: (o?: unknown) => seen.push(o) });
  hook!();
  assertEquals(seen, [{ type: "major", execution: "sync", flavor: "last-resort" }]);
  assertEquals(fullGarbageCollection({}), undefined);
});
