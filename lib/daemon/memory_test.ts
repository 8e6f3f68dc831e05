import { assertEquals } from "../../tests/assert.ts";
import { Logger } from "./log.ts";
import { fullGarbageCollection, GC_MIN_EVENTS, MemoryRelease, TRIM_DELAY_MS } from "./memory.ts";

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("MemoryRelease: one release after a burst, GC first at start and after big bursts, none after stop", async () => {
  const calls: string[] = [];
  const log = new Logger({ sink: () => {}, time: false });
  const m = new MemoryRelease({
    releaseMemory: () => calls.push("trim"),
    collectGarbage: () => calls.push("gc"),
  }, log);
  m.afterFullPass(10);
  m.afterEvents(3);
  m.afterEvents(2); // debounced into the same release
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls, ["gc", "trim"], "start-up's garbage: GC before the first trim");
  m.afterEvents(5);
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls, ["gc", "trim", "trim"], "a small burst: trim only");
  m.afterEvents(GC_MIN_EVENTS);
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls.slice(3), ["gc", "trim"], "a big burst: GC again");
  m.afterEvents(1);
  m.stop();
  await wait(TRIM_DELAY_MS + 300);
  assertEquals(calls.length, 5, "nothing after stop");
});

Deno.test("fullGarbageCollection: V8's gc asked for a synchronous last-resort major GC; none without gc", () => {
  const seen: unknown[] = [];
  const hook = fullGarbageCollection({ gc: (o?: unknown) => seen.push(o) });
  hook!();
  assertEquals(seen, [{ type: "major", execution: "sync", flavor: "last-resort" }]);
  assertEquals(fullGarbageCollection({}), undefined);
});
