/**
 * Reading netlink attributes (struct nlattr: u16 length, u16 type, then the value, padded to 4 bytes): the
 * one walker every decoder of lib/netlink uses, and the string value reader. Bounds-checked: an attribute
 * shorter than its own header, or running past the end of its message or nest, ends the walk, so nothing
 * outside `[from, to)` is ever read as a value.
 * @module
 */

/** The type bits of nla_type (the top two are the nested and byte-order flags; linux/netlink.h). */
export const NLA_TYPE_MASK = 0x3fff;

/**
 * A cursor over the attributes in `dv[from..to)`: each {@link AttrWalk.next} moves to the next attribute
 * and sets {@link AttrWalk.type}, {@link AttrWalk.v} (its value's offset) and {@link AttrWalk.vlen};
 * false at the end. `for (const at = new AttrWalk(dv, from, to); at.next();) { … }` — a loop, not a
 * callback per attribute: the route dump reads ten attributes from each of thousands of messages.
 */
export class AttrWalk {
  /** The current attribute's type (flags masked off), value offset and value length. */
  type = 0;
  v = 0;
  vlen = 0;
  #dv: DataView;
  #a: number;
  #to: number;

  constructor(dv: DataView, from: number, to: number) {
    this.#dv = dv;
    this.#a = from;
    this.#to = to;
  }

  /** Moves to the next attribute; false when there is none, or it is shorter than a header or overruns. */
  next(): boolean {
    const a = this.#a, dv = this.#dv;
    if (a + 4 > this.#to) return false;
    const alen = dv.getUint16(a, true);
    if (alen < 4 || a + alen > this.#to) {
      this.#a = this.#to;
      return false;
    }
    this.type = dv.getUint16(a + 2, true) & NLA_TYPE_MASK;
    this.v = a + 4;
    this.vlen = alen - 4;
    this.#a = a + ((alen + 3) & ~3);
    return true;
  }
}

const dec = new TextDecoder();

/** A string attribute's value `b[v..v+vlen)`, up to its first NUL. */
export function attrStr(b: Uint8Array, v: number, vlen: number): string {
  let end = v;
  while (end < v + vlen && b[end] !== 0) end++;
  return dec.decode(b.subarray(v, end));
}
