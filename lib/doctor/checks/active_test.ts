import { assertEquals } from "../../../tests/assert.ts";
import { pathMtu } from "./active.ts";

Deno.test("pathMtu: null when FLANNEL_MTU passes, else the largest packet that passes, 0 when none", async () => {
  const upTo = (max: number) => (payload: number) => Promise.resolve(payload + 28 <= max);
  assertEquals(await pathMtu(upTo(1450), 1450), null);
  assertEquals(await pathMtu(upTo(1354), 1450), 1354);
  assertEquals(await pathMtu(upTo(576), 8950), 576);
  assertEquals(await pathMtu(() => Promise.resolve(false), 1450), 0);
  let probes = 0;
  await pathMtu((p) => Promise.resolve(++probes > 0 && p < 100), 65000);
  assertEquals(probes <= 18, true, `bounded: ${probes} probes`);
});
