/**
 * The one's-complement sum of gso.ts's `csum` computed with WebAssembly SIMD, for the receive coalescer's
 * per-segment checksum check (the hot part of it): the bytes are copied into the module's memory (16-byte
 * aligned, zero-padded) and summed 16 at a time as little-endian 16-bit lanes (i32x4.extadd_pairwise).
 * About twice as fast as `csum` on a segment (docs/performance.md).
 * The module is 110 bytes written out below (no toolchain); null when WebAssembly is unavailable (V8
 * --jitless), and callers then use `csum`.
 * @module
 */

/** Most bytes summed in one call (the module's one 64 KiB page, less the padding). */
export const SIMD_MAX = 65536 - 16;

// (func (param $len i32) (result i32) (local $i i32) (local $acc v128)
//   (block (loop (br_if 1 (i32.ge_u $i $len))
//     (acc = i32x4.add acc (i32x4.extadd_pairwise_i16x8_u (v128.load $i))) (i += 16) (br 0)))
//   lane 0 + lane 1 + lane 2 + lane 3)
const BODY = [
  0x02,
  0x01,
  0x7f,
  0x01,
  0x7b, // locals: $i i32, $acc v128
  0x02,
  0x40,
  0x03,
  0x40, // block, loop
  0x20,
  0x01,
  0x20,
  0x00,
  0x4f,
  0x0d,
  0x01, // br_if 1 (i >= len)
  0x20,
  0x02,
  0x20,
  0x01,
  0xfd,
  0x00,
  0x04,
  0x00, // acc, v128.load align 16
  0xfd,
  0x7f,
  0xfd,
  0xae,
  0x01,
  0x21,
  0x02, // extadd_pairwise_i16x8_u, i32x4.add, local.set acc
  0x20,
  0x01,
  0x41,
  0x10,
  0x6a,
  0x21,
  0x01, // i += 16
  0x0c,
  0x00,
  0x0b,
  0x0b, // br 0, end, end
  0x20,
  0x02,
  0xfd,
  0x1b,
  0x00,
  0x20,
  0x02,
  0xfd,
  0x1b,
  0x01,
  0x6a, // lanes 0 + 1
  0x20,
  0x02,
  0xfd,
  0x1b,
  0x02,
  0x6a,
  0x20,
  0x02,
  0xfd,
  0x1b,
  0x03,
  0x6a, // + lanes 2, 3
  0x0b,
];
const MODULE = new Uint8Array([
  0x00,
  0x61,
  0x73,
  0x6d,
  0x01,
  0x00,
  0x00,
  0x00, // magic, version
  0x01,
  0x06,
  0x01,
  0x60,
  0x01,
  0x7f,
  0x01,
  0x7f, // type: (i32) -> i32
  0x03,
  0x02,
  0x01,
  0x00, // function 0 of type 0
  0x05,
  0x03,
  0x01,
  0x00,
  0x01, // memory: 1 page
  0x07,
  0x0d,
  0x02,
  0x03,
  0x6d,
  0x65,
  0x6d,
  0x02,
  0x00,
  0x03,
  0x73,
  0x75,
  0x6d,
  0x00,
  0x00, // exports mem, sum
  0x0a,
  BODY.length + 2,
  0x01,
  BODY.length,
  ...BODY, // code
]);

/** `csum(b, off, len, init)` for `len` ≤ {@link SIMD_MAX} (see the module doc). */
export type SimdSum = (b: Uint8Array, off: number, len: number, init: number) => number;

/** The SIMD sum, or null when WebAssembly (or its SIMD) is not available here. */
export function simdSum(): SimdSum | null {
  let mem: Uint8Array, sum: (n: number) => number;
  try {
    const inst = new WebAssembly.Instance(new WebAssembly.Module(MODULE));
    mem = new Uint8Array((inst.exports.mem as WebAssembly.Memory).buffer);
    sum = inst.exports.sum as (n: number) => number;
  } catch {
    return null; // no WebAssembly (--jitless) or no SIMD
  }
  return (b, off, len, init) => {
    mem.set(b.subarray(off, off + len), 0);
    mem.fill(0, len, len + 16);
    let s = sum(len) >>> 0;
    while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
    // Summed little-endian from an even address: swapped to the big-endian sum.
    s = ((s & 0xff) << 8) | (s >> 8);
    if (init !== 0) {
      s += init;
      while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
    }
    return s;
  };
}
