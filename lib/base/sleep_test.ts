import { assert, assertEquals, assertRejects } from "../../tests/assert.ts";
import { sleep, withTimeout } from "./sleep.ts";

Deno.test("sleep: resolves, and an abort ends it early without rejecting", async () => {
  await sleep(1);
  const ac = new AbortController();
  const long = sleep(3_600_000, ac.signal);
  ac.abort();
  await long; // would keep the test (and its timer sanitizer) waiting for an hour otherwise
  await sleep(3_600_000, ac.signal); // already aborted: at once
});

Deno.test("sleep: a delay beyond the timer's range is a long sleep, not an immediate wake-up", async () => {
  const ac = new AbortController();
  let woke = false;
  const p = sleep(2 ** 40, ac.signal).then(() => (woke = true));
  await sleep(20);
  assert(!woke, "a 2^40 ms sleep ended at once");
  ac.abort();
  await p;
});

Deno.test("withTimeout: the value when in time, the given error when not", async () => {
  assertEquals(await withTimeout(Promise.resolve(7), 1000, () => new Error("late")), 7);
  const never = new Promise<never>(() => {});
  await assertRejects(() => withTimeout(never, 10, () => new RangeError("too slow")), RangeError, "too slow");
});
