import { assertEquals } from "../../../tests/assert.ts";
import { attrStr, AttrWalk } from "./attrs.ts";

/** Attributes as bytes: [type, value] each, padded to 4; `lens` overrides a header's length field. */
function attrBytes(list: [number, number[]][], lens: Record<number, number> = {}): Uint8Array {
  const out: number[] = [];
  list.forEach(([type, value], i) => {
    const len = lens[i] ?? 4 + value.length;
    out.push(len & 0xff, len >> 8, type & 0xff, type >> 8, ...value);
    while (out.length % 4) out.push(0);
  });
  return new Uint8Array(out);
}

function walk(b: Uint8Array, from = 0, to = b.length): [number, number, number][] {
  const got: [number, number, number][] = [];
  for (const at = new AttrWalk(new DataView(b.buffer), from, to); at.next();) {
    got.push([at.type, at.v, at.vlen]);
  }
  return got;
}

Deno.test("AttrWalk: each attribute's type (flags masked), value offset and length; padding skipped", () => {
  const b = attrBytes([[1, [10, 0, 0, 1]], [0x8000 | 18, [7]], [3, [0x65, 0x74, 0x68, 0x30, 0]]]);
  assertEquals(walk(b), [[1, 4, 4], [18, 12, 1], [3, 20, 5]]);
  assertEquals(attrStr(b, 20, 5), "eth0");
  assertEquals(attrStr(b, 20, 3), "eth", "a string without its NUL ends with the value");
});

Deno.test("AttrWalk: a header shorter than 4, an attribute past the end, or a truncated header ends the walk", () => {
  const two = attrBytes([[1, [1, 2, 3, 4]], [2, [5, 6, 7, 8]]]);
  assertEquals(walk(attrBytes([[1, [1, 2, 3, 4]], [2, [5, 6, 7, 8]]], { 1: 2 })), [[1, 4, 4]]);
  assertEquals(walk(attrBytes([[1, [1, 2, 3, 4]], [2, [5, 6, 7, 8]]], { 1: 200 })), [[1, 4, 4]]);
  // The second attribute runs past `to` (the end of its message or nest): not read, though the buffer goes on.
  assertEquals(walk(two, 0, 14), [[1, 4, 4]]);
  assertEquals(walk(two, 0, 10), [[1, 4, 4]]);
  assertEquals(walk(two, 0, 3), []);
  assertEquals(walk(new Uint8Array(0)), []);
  // A length of 0 would loop for ever without the check.
  assertEquals(walk(attrBytes([[1, []]], { 0: 0 })), []);
});
