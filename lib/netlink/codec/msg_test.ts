/** The netlink request writer's attribute encodings (no socket). */
import { assertEquals } from "../../../tests/assert.ts";
import { MsgWriter } from "./msg.ts";

/** The value bytes of the one attribute written into a fresh message. */
function attrOf(write: (w: MsgWriter) => void): { len: number; value: number[]; padded: number } {
  const w = new MsgWriter(32);
  const h = w.begin(16, 0, 1, 0);
  write(w);
  w.end();
  const dv = new DataView(w.buf.buffer);
  const len = dv.getUint16(h, true);
  return { len, value: [...w.buf.subarray(h + 4, h + len)], padded: w.len - h };
}

Deno.test("MsgWriter.str: names as UTF-8 with their NUL, padded to 4", () => {
  // Found by linkmsg_prop_test.ts: a name such as "¡" (valid for CNI_IFNAME: 2 bytes) was written one
  // byte per UTF-16 unit, cut to its low byte, and read back from the kernel as U+FFFD.
  assertEquals(attrOf((w) => w.str(3, "¡")), { len: 7, value: [0xc2, 0xa1, 0], padded: 8 });
  assertEquals(attrOf((w) => w.str(3, "eth0")), { len: 9, value: [0x65, 0x74, 0x68, 0x30, 0], padded: 12 });
  const name = "ᚁé😀a"; // 3 + 2 + 4 + 1 bytes
  assertEquals(
    new TextDecoder().decode(new Uint8Array(attrOf((w) => w.str(3, name)).value.slice(0, -1))),
    name,
  );
});
