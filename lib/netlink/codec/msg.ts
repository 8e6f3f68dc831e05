/**
 * Netlink request bytes built in JavaScript: nlmsghdr + family header + attributes, several messages one
 * after another in one growing buffer, ready for one send(2) on the handle's socket (batch.ts).
 *
 * Why not libnl's own message builders (nlmsg_alloc_simple / nlmsg_append / nla_put* / nl_send_auto)?
 * Each of those is an FFI call (and a symbol to bind on a plugin's first call), so a route
 * with four attributes costs seven calls and a malloc; here the same bytes are a handful of DataView
 * stores, and a whole batch of requests is ONE send(2) (the kernel processes every message of a
 * datagram in order and acks each one). Measured in bench/netlink_bench.ts.
 * @module
 */

const utf8 = new TextEncoder();

/** One growing buffer of netlink messages. */
export class MsgWriter {
  buf: Uint8Array<ArrayBuffer>;
  dv: DataView<ArrayBuffer>;
  /** Bytes written. */
  len = 0;
  /** Messages written. */
  count = 0;
  #start = 0;
  /** True between begin() and end(). */
  #open = false;
  #nests: number[] = [];

  constructor(size = 4096) {
    this.buf = new Uint8Array(size);
    this.dv = new DataView(this.buf.buffer);
  }

  /** Forgets every message (keeps the buffer). */
  reset(): void {
    this.len = 0;
    this.count = 0;
    this.#open = false;
    this.#nests.length = 0;
  }

  #room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const b = new Uint8Array(Math.max(this.buf.length * 2, this.len + n + 256));
    b.set(this.buf.subarray(0, this.len));
    // The outgrown buffer may hold a secret (a WireGuard SET_DEVICE's keys): zero it before dropping it.
    this.buf.fill(0, 0, this.len);
    this.buf = b;
    this.dv = new DataView(b.buffer);
  }

  /** Starts a message: nlmsghdr (type, flags, seq; pid 0) followed by `hdrLen` zeroed header bytes. */
  begin(type: number, flags: number, seq: number, hdrLen: number): number {
    this.#room(16 + hdrLen);
    this.#start = this.len;
    this.#open = true;
    this.buf.fill(0, this.len, this.len + 16 + hdrLen);
    this.dv.setUint16(this.len + 4, type, true);
    this.dv.setUint16(this.len + 6, flags, true);
    this.dv.setUint32(this.len + 8, seq >>> 0, true);
    this.len += 16 + hdrLen;
    return this.#start + 16; // offset of the family header
  }

  /** Ends the message: writes its length. */
  end(): void {
    this.dv.setUint32(this.#start, this.len - this.#start, true);
    this.#open = false;
    this.count++;
  }

  /** Drops the message being written, if one was begun (finished messages stay). */
  abort(): void {
    if (this.#open) this.len = this.#start;
    this.#open = false;
    this.#nests.length = 0;
  }

  /** An attribute with raw bytes. */
  bytes(type: number, v: Uint8Array): void {
    const alen = 4 + v.length, pad = (alen + 3) & ~3;
    this.#room(pad);
    this.dv.setUint16(this.len, alen, true);
    this.dv.setUint16(this.len + 2, type, true);
    this.buf.set(v, this.len + 4);
    this.buf.fill(0, this.len + alen, this.len + pad);
    this.len += pad;
  }

  /** A u32 attribute. */
  u32(type: number, v: number): void {
    this.#room(8);
    this.dv.setUint16(this.len, 8, true);
    this.dv.setUint16(this.len + 2, type, true);
    this.dv.setUint32(this.len + 4, v >>> 0, true);
    this.len += 8;
  }

  /** A u8 attribute. */
  u8(type: number, v: number): void {
    this.#room(8);
    this.dv.setUint32(this.len + 4, 0, true);
    this.dv.setUint16(this.len, 5, true);
    this.dv.setUint16(this.len + 2, type, true);
    this.buf[this.len + 4] = v;
    this.len += 8;
  }

  /** A NUL-terminated string attribute, UTF-8 as the kernel keeps interface names (ASCII written directly). */
  str(type: number, s: string): void {
    let ascii = true;
    for (let i = 0; i < s.length && ascii; i++) ascii = s.charCodeAt(i) < 0x80;
    // Another character's code unit would be cut to its low byte: "¡" came back from the kernel as U+FFFD.
    if (!ascii) return this.bytes(type, utf8.encode(s + "\0"));
    const alen = 4 + s.length + 1, pad = (alen + 3) & ~3;
    this.#room(pad);
    this.dv.setUint16(this.len, alen, true);
    this.dv.setUint16(this.len + 2, type, true);
    for (let i = 0; i < s.length; i++) this.buf[this.len + 4 + i] = s.charCodeAt(i);
    this.buf.fill(0, this.len + 4 + s.length, this.len + pad);
    this.len += pad;
  }

  /** `n` zeroed bytes inside the message (a struct inside a nested attribute); returns their offset. */
  raw(n: number): number {
    const pad = (n + 3) & ~3;
    this.#room(pad);
    this.buf.fill(0, this.len, this.len + pad);
    const at = this.len;
    this.len += pad;
    return at;
  }

  /** Opens a nested attribute (close it with {@link MsgWriter.nestEnd}). */
  nest(type: number): void {
    this.#room(4);
    this.#nests.push(this.len);
    this.dv.setUint16(this.len + 2, type, true);
    this.len += 4;
  }

  /** Closes the innermost nested attribute. */
  nestEnd(): void {
    const at = this.#nests.pop()!;
    this.dv.setUint16(at, this.len - at, true);
  }

  /** The bytes of messages `from`..`to` (byte offsets). */
  slice(from = 0, to = this.len): Uint8Array<ArrayBuffer> {
    return this.buf.subarray(from, to);
  }
}
