import { assert, assertEquals } from "../../../tests/assert.ts";
import { csum } from "./gso.ts";
import { SIMD_MAX, simdSum } from "./csum_simd.ts";

Deno.test("simdSum: equals csum at every alignment, length (to a full page) and initial sum", () => {
  const simd = simdSum();
  assert(simd, "WebAssembly SIMD is available in tests (the udp data path runs without --jitless)");
  const b = new Uint8Array(SIMD_MAX + 64);
  crypto.getRandomValues(b.subarray(0, 65536));
  crypto.getRandomValues(b.subarray(65536));
  for (let off = 0; off < 8; off++) {
    for (let len = 0; len <= 300; len++) {
      for (const init of [0, 1, 0xfffe, 0xffff]) {
        assertEquals(simd(b, off, len, init), csum(b, off, len, init), `off ${off} len ${len} init ${init}`);
      }
    }
  }
  for (const len of [1432, 1433, 9000, 32768, SIMD_MAX]) {
    assertEquals(simd(b, 3, len, 77), csum(b, 3, len, 77));
  }
  b.fill(0xff, 0, 4096);
  assertEquals(simd(b, 0, 4096, 0), csum(b, 0, 4096, 0), "all ones");
});
