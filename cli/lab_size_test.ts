/** `flanctl lab up --nodes` is bounded before anything is made (the host's limits, as root: tests/lab_size_test.ts). */
import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { flanctl, TEST_PREFIX } from "../tests/netns.ts";

Deno.test("lab up: --nodes is bounded by the underlay /24", async () => {
  const r = await flanctl(["lab", "up", "--name", `${TEST_PREFIX}sz`.slice(0, 8), "--nodes", "201"]);
  assertEquals(r.code, 2, r.stderr);
  assertStringIncludes(r.stderr, "--nodes 201: give a whole number from 1 to 200");
});
