import { assert, assertEquals } from "../../tests/assert.ts";
import { Backoff } from "./backoff.ts";

Deno.test("Backoff: 0.5 s doubling to 10 s, reset to the first; custom bounds", async () => {
  const d = new Backoff();
  const seen: number[] = [];
  for (let i = 0; i < 7; i++) {
    seen.push(d.ms);
    d.grow();
  }
  assertEquals(seen, [500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
  d.reset();
  assertEquals(d.ms, 500);
  const short = new Backoff({ minMs: 1, maxMs: 3 });
  await short.wait();
  await short.wait();
  assertEquals(short.ms, 3);
});

Deno.test("Backoff: jitter 1.0 keeps each delay in [base, 2 × base]; ms is the delay next() takes", () => {
  const b = new Backoff({ minMs: 800, maxMs: 30_000, jitter: 1.0 });
  for (const base of [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]) {
    const shown = b.ms;
    const ms = b.next();
    assertEquals(ms, shown, "the delay logged before a wait is the one slept");
    assert(ms >= base && ms <= 2 * base, `${ms} for base ${base}`);
  }
});

Deno.test("Backoff: back to the first delay after resetAfterMs without a retry, never without one", async () => {
  const r = new Backoff({ minMs: 100, maxMs: 1000, resetAfterMs: 0 });
  assertEquals(r.next(), 100);
  await new Promise((res) => setTimeout(res, 5));
  assertEquals(r.next(), 100); // the last retry is "long ago" (resetAfterMs 0): back to the first delay
  const d = new Backoff({ minMs: 100, maxMs: 1000 }); // default: Infinity
  assertEquals(d.next(), 100);
  await new Promise((res) => setTimeout(res, 5));
  assertEquals([d.next(), d.next(), d.next(), d.next(), d.next()], [200, 400, 800, 1000, 1000]);
});

Deno.test("Backoff.wait: the caller's own sleep gets each delay, announced first, and the delay grows", async () => {
  const b = new Backoff({ minMs: 50, maxMs: 200 });
  const log: string[] = [];
  for (let i = 0; i < 4; i++) {
    await b.wait({
      announce: (ms) => log.push(`announce ${ms}`),
      sleep: (ms) => (log.push(`sleep ${ms}`), Promise.resolve()),
    });
  }
  assertEquals(log, [
    "announce 50",
    "sleep 50",
    "announce 100",
    "sleep 100",
    "announce 200",
    "sleep 200",
    "announce 200",
    "sleep 200",
  ]);
});
