/**
 * Userspace segmentation offload for the UDP backend's data path, on IP packets as a TUN device with
 * IFF_VNET_HDR hands them over: a 10-byte `struct virtio_net_hdr` followed by the packet.
 *
 * - {@link tsoSplit}: a TCP GSO super-packet (up to 64 KiB, VIRTIO_NET_HDR_GSO_TCPV4/6) cut into ordinary
 *   MSS-sized IP packets, as a NIC's TSO would (IP total length, IPv4 id + 1 per segment and header
 *   checksum, TCP sequence numbers, FIN/PSH only on the last segment, CWR only on the first, full TCP
 *   checksum with the pseudo header). Each segment is one flannel UDP payload: the wire stays byte for byte
 *   what flannel's C proxy sends, so a peer without offloads interoperates.
 * - {@link completeCsum}: the checksum of a VIRTIO_NET_HDR_F_NEEDS_CSUM packet without GSO, filled in.
 * - {@link Coalescer}: the receive side — consecutive in-order TCP/IPv4 segments of one flow (the same
 *   addresses, ports, TOS, TTL, DF, ACK, window and options, contiguous sequence numbers, equal payload
 *   sizes but the last) merged into one GSO super-packet with a NEEDS_CSUM header, so the kernel runs its
 *   stack once per 64 KiB rather than once per segment (what GRO does for a NIC). As GRO, it merges only
 *   segments whose IPv4 header and TCP checksums verify (the merged packet's NEEDS_CSUM tells the kernel
 *   that nothing is left to check): a corrupted one is written out on its own, unmerged, for the pod's
 *   kernel to verify and drop.
 *
 * Pure computation on Uint8Arrays (no syscalls, no allocation per packet on the hot paths). Checksums
 * are summed 32 bits at a time on little-endian hosts (x86-64, arm64: the only ones the data path runs on).
 * @module
 */

import { SIMD_MAX, simdSum } from "./csum_simd.ts";

/** Bytes of `struct virtio_net_hdr` (no num_buffers: TUNSETVNETHDRSZ 10). */
export const VNET_HDR_LEN = 10;
/** virtio_net_hdr.flags: the checksum from csum_start is to be filled in. */
export const VNET_F_NEEDS_CSUM = 1;
/** virtio_net_hdr.gso_type values. */
export const GSO_NONE = 0, GSO_TCPV4 = 1, GSO_UDP = 3, GSO_TCPV6 = 4, GSO_ECN = 0x80;

const TCP = 6;
const FIN = 0x01, SYN = 0x02, RST = 0x04, PSH = 0x08, URG = 0x20, CWR = 0x80;

/** Whole-buffer views (32-bit words and bytes) of the buffers summed, made once per buffer. */
const views = new WeakMap<ArrayBufferLike, [Int32Array, Uint8Array]>();
let lastBuf: ArrayBufferLike | null = null;
let lastU32: Int32Array = new Int32Array(0), lastU8: Uint8Array = new Uint8Array(0);
function viewsOf(b: Uint8Array): void {
  if (b.buffer === lastBuf) return;
  let v = views.get(b.buffer);
  if (!v) {
    v = [new Int32Array(b.buffer, 0, b.buffer.byteLength >>> 2), new Uint8Array(b.buffer)];
    views.set(b.buffer, v);
  }
  lastBuf = b.buffer;
  [lastU32, lastU8] = v;
}

/** Folds a one's-complement accumulator (any non-negative number < 2^53) to 16 bits. */
function fold(acc: number): number {
  while (acc > 0xffff) acc = (acc % 65536) + Math.floor(acc / 65536);
  return acc;
}

/**
 * The 16-bit one's-complement sum (RFC 1071, folded, not complemented) of `b[off .. off+len)` read as
 * big-endian 16-bit words, plus `init` (an earlier sum).
 */
export function csum(b: Uint8Array, off: number, len: number, init = 0): number {
  if (len > 65536) {
    let acc = init;
    for (let o = 0; o < len; o += 65536) {
      const l = Math.min(65536, len - o);
      // A chunk at an odd offset from the start counts its bytes the other way round.
      const s = csum(b, off + o, l);
      acc += (o & 1) ? ((s & 0xff) << 8) | (s >> 8) : s;
    }
    return fold(acc);
  }
  // Summed as little-endian words at absolute (buffer) addresses: a byte at an even address lands in the
  // low byte, one at an odd address in the high byte; swapped at the end when the data starts even.
  viewsOf(b);
  const buf = lastU32, bytes = lastU8;
  const start = b.byteOffset + off;
  let a = start;
  const end = start + len;
  let acc = 0;
  while (a < end && (a & 3) !== 0) {
    acc += (a & 1) ? bytes[a] << 8 : bytes[a];
    a++;
  }
  const wEnd = end & ~3;
  if (a < wEnd) {
    // Int32 words, each added as its two 16-bit halves, into two int32 accumulators (one per word of a
    // pair): each stays below 2^31 for the ≤ 16384 words of 64 KiB (faster than accumulators per half:
    // docs/performance.md).
    let s0 = 0, s1 = 0, w = a >>> 2;
    const we = wEnd >>> 2;
    for (; w + 2 <= we; w += 2) {
      const x = buf[w], y = buf[w + 1];
      s0 = (s0 + (x >>> 16) + (x & 0xffff)) | 0;
      s1 = (s1 + (y >>> 16) + (y & 0xffff)) | 0;
    }
    if (w < we) {
      const x = buf[w];
      s0 = (s0 + (x >>> 16) + (x & 0xffff)) | 0;
    }
    acc += s0 + s1;
    a = wEnd;
  }
  while (a < end) {
    acc += (a & 1) ? bytes[a] << 8 : bytes[a];
    a++;
  }
  let s = fold(acc);
  if ((start & 1) === 0) s = ((s & 0xff) << 8) | (s >> 8);
  return init === 0 ? s : fold(s + init);
}

/** The pseudo-header sum of a TCP/UDP packet of `l4len` bytes in IP packet `p` (at `ipOff`). */
function pseudo(p: Uint8Array, ipOff: number, l4len: number, proto: number): number {
  if ((p[ipOff] >> 4) === 4) return csum(p, ipOff + 12, 8, proto + l4len);
  return csum(p, ipOff + 8, 32, proto + (l4len >>> 16) + (l4len & 0xffff));
}

function put16(b: Uint8Array, o: number, v: number): void {
  b[o] = v >> 8;
  b[o + 1] = v & 0xff;
}

/** The IPv4 header checksum of the header at `o` recomputed. */
function ip4Csum(b: Uint8Array, o: number): void {
  b[o + 10] = b[o + 11] = 0;
  put16(b, o + 10, ~csum(b, o, (b[o] & 15) * 4) & 0xffff);
}

/** The parsed fields of a virtio_net_hdr. */
export interface VnetHdr {
  flags: number;
  gsoType: number;
  hdrLen: number;
  gsoSize: number;
  csumStart: number;
  csumOffset: number;
}

/** Reads the virtio_net_hdr at `b[off]` (little-endian, as legacy virtio on these hosts). */
export function readVnetHdr(b: Uint8Array, off = 0): VnetHdr {
  const u16 = (o: number) => b[off + o] | (b[off + o + 1] << 8);
  return {
    flags: b[off],
    gsoType: b[off + 1],
    hdrLen: u16(2),
    gsoSize: u16(4),
    csumStart: u16(6),
    csumOffset: u16(8),
  };
}

/** Writes a virtio_net_hdr at `b[off]`. */
function writeVnetHdr(b: Uint8Array, off: number, h: VnetHdr): void {
  b[off] = h.flags;
  b[off + 1] = h.gsoType;
  const p16 = (o: number, v: number) => {
    b[off + o] = v & 0xff;
    b[off + o + 1] = v >> 8;
  };
  p16(2, h.hdrLen);
  p16(4, h.gsoSize);
  p16(6, h.csumStart);
  p16(8, h.csumOffset);
}

/**
 * Completes a partial checksum (VIRTIO_NET_HDR_F_NEEDS_CSUM without GSO): the one's-complement sum of
 * `p[off+csumStart .. off+len)` (whose checksum field holds the pseudo-header sum) complemented into the
 * field at csumStart + csumOffset. False when the offsets do not fit the packet (then it is dropped).
 */
export function completeCsum(p: Uint8Array, off: number, len: number, csumStart: number, csumOffset: number) {
  const f = csumStart + csumOffset;
  if (csumStart >= len || f + 2 > len) return false;
  const s = ~csum(p, off + csumStart, len - csumStart) & 0xffff;
  // UDP: a computed 0 is sent as 0xffff (0 means "no checksum").
  put16(p, off + f, s === 0 && csumOffset === 6 ? 0xffff : s);
  return true;
}

/**
 * Cuts the TCP GSO super-packet `src[off .. off+len)` (an IPv4 or IPv6 packet without extension
 * headers, TCP payload in segments of `mss` bytes) into IP packets written one after another to `out`
 * from `outOff`, segment i at `outOff + i * (headers + mss)`; `lens[i]` receives each segment's length.
 * Returns the number of segments, or -1 when the packet is not one this can cut (not TCP, options
 * bigger than the packet, mss 0, or `out`/`lens` too small): the caller drops it.
 */
export function tsoSplit(
  src: Uint8Array,
  off: number,
  len: number,
  mss: number,
  out: Uint8Array,
  outOff: number,
  lens: Uint32Array,
): number {
  if (len < 20 || mss <= 0) return -1;
  const v4 = (src[off] >> 4) === 4;
  let ihl: number;
  if (v4) {
    ihl = (src[off] & 15) * 4;
    if (ihl < 20 || src[off + 9] !== TCP) return -1;
  } else {
    ihl = 40;
    if ((src[off] >> 4) !== 6 || src[off + 6] !== TCP) return -1;
  }
  if (len < ihl + 20) return -1;
  const thl = (src[off + ihl + 12] >> 4) * 4;
  const hl = ihl + thl;
  if (thl < 20 || len < hl) return -1;
  const payload = len - hl;
  const n = payload === 0 ? 1 : Math.ceil(payload / mss);
  if (n > lens.length || outOff + n * hl + payload > out.length) return -1;
  const seq0 = ((src[off + ihl + 4] << 24) | (src[off + ihl + 5] << 16) | (src[off + ihl + 6] << 8) |
    src[off + ihl + 7]) >>> 0;
  const id0 = (src[off + 4] << 8) | src[off + 5];
  const flags = src[off + ihl + 13];
  const hdr = src.subarray(off, off + hl);
  let o = outOff;
  for (let i = 0; i < n; i++) {
    const plen = i < n - 1 ? mss : payload - mss * (n - 1);
    out.set(hdr, o);
    out.set(src.subarray(off + hl + i * mss, off + hl + i * mss + plen), o + hl);
    const segLen = hl + plen;
    if (v4) {
      put16(out, o + 2, segLen);
      put16(out, o + 4, (id0 + i) & 0xffff);
      ip4Csum(out, o);
    } else put16(out, o + 4, segLen - 40);
    const t = o + ihl;
    const seq = (seq0 + i * mss) >>> 0;
    out[t + 4] = seq >>> 24, out[t + 5] = (seq >>> 16) & 0xff, out[t + 6] = (seq >>> 8) & 0xff;
    out[t + 7] = seq & 0xff;
    let f = flags;
    if (i < n - 1) f &= ~(FIN | PSH);
    if (i > 0) f &= ~CWR;
    out[t + 13] = f;
    out[t + 16] = out[t + 17] = 0;
    const s = csum(out, t, thl + plen, pseudo(out, o, thl + plen, TCP));
    put16(out, t + 16, ~s & 0xffff);
    lens[i] = segLen;
    o += segLen;
  }
  return n;
}

/**
 * True when the IPv4 header checksum and the TCP checksum (with the pseudo header) of the TCP/IPv4 packet
 * `p[off .. off+len)` (a 20-byte IP header, as the Coalescer merges) verify.
 */
function segmentOk(p: Uint8Array, off: number, len: number): boolean {
  // The IPv4 header and the pseudo header (addresses, protocol, TCP length) summed here: two csum calls
  // fewer per segment.
  let h = 0, ph = TCP + len - 20;
  for (let i = off; i < off + 12; i += 2) h += (p[i] << 8) | p[i + 1];
  for (let i = off + 12; i < off + 20; i += 2) ph += (p[i] << 8) | p[i + 1];
  if (fold(h + ph - TCP - len + 20) !== 0xffff) return false;
  const sum = SIMD !== null && len - 20 <= SIMD_MAX
    ? SIMD(p, off + 20, len - 20, fold(ph))
    : csum(p, off + 20, len - 20, fold(ph));
  return sum === 0xffff;
}

/** The WebAssembly SIMD sum for the segment check (csum_simd.ts); null where WebAssembly is unavailable. */
const SIMD = simdSum();

/** Where a {@link Coalescer} puts its packets (an object with a method: one call target for V8). */
export interface PacketSink {
  /** `buf[0..len)` is a virtio_net_hdr and a packet holding `segments` packets of `wireBytes` as they came. */
  emit(buf: Uint8Array, len: number, segments: number, wireBytes: number): void;
}

/**
 * Merges consecutive TCP/IPv4 segments of one flow into GSO super-packets (see the module doc). Feed the
 * packets of one receive batch in order with {@link add}, then {@link flush}; every packet comes out
 * exactly once through the sink's `emit`, in order, either as it was or merged, always preceded by a
 * virtio_net_hdr: `emit(buf, len, segments, wireBytes)` gets a buffer whose first `len` bytes are the header and the
 * packet, the number of packets it holds and their bytes as they came.
 * Packets handed to `add` must have {@link VNET_HDR_LEN} bytes of headroom before them (written here).
 * Never waits for more packets: a run ends at the batch's end.
 */
export class Coalescer {
  readonly #out: Uint8Array;
  readonly #sink: PacketSink;
  /** The held packet's buffer (a caller's slot) and offset, while only one segment is held. */
  #first: Uint8Array | null = null;
  #firstOff = 0;
  #len = 0; // bytes of the (merged) IP packet held
  #segs = 0;
  #wire = 0; // bytes of the packets merged, as they came
  #mss = 0;
  #hl = 0;
  #nextSeq = 0;
  /** False once the held run can take no more (short segment, PSH). */
  #open = false;
  /** True once the held first segment's checksums were verified (only done when a second one comes). */
  #firstOk = false;
  /** Maximal merged IP packet: 64 KiB − 1 (IPv4 total length). */
  readonly #max: number;

  /** `out`: scratch for merged packets, at least VNET_HDR_LEN + 65535 bytes. */
  constructor(out: Uint8Array, sink: PacketSink) {
    this.#out = out;
    this.#sink = sink;
    this.#max = Math.min(65535, out.length - VNET_HDR_LEN);
  }

  /** Length of the TCP payload when `p[off..off+len)` can be part of a run, else -1. */
  #mergeable(p: Uint8Array, off: number, len: number): number {
    if (len < 40 || p[off] !== 0x45 || p[off + 9] !== TCP) return -1;
    if (((p[off + 2] << 8) | p[off + 3]) !== len) return -1;
    if ((p[off + 6] & 0x3f) !== 0 || p[off + 7] !== 0) return -1; // MF or a fragment offset
    const thl = (p[off + 32] >> 4) * 4;
    if (thl < 20 || 20 + thl >= len) return -1; // no payload: a pure ACK passes as it is
    if ((p[off + 33] & (SYN | RST | URG | FIN | CWR)) !== 0 || (p[off + 33] & 0x10) === 0) return -1;
    return len - 20 - thl;
  }

  /** True when `p[off..)` (mergeable, payload `plen`) continues the held run. */
  #continues(p: Uint8Array, off: number, plen: number): boolean {
    if (!this.#open || plen > this.#mss || this.#len + plen > this.#max) return false;
    const h = this.#first ?? this.#out;
    const ho = this.#first ? this.#firstOff : VNET_HDR_LEN;
    const hl = this.#hl;
    if (((p[off + 32] >> 4) * 4) + 20 !== hl) return false;
    // TOS, DF, TTL; addresses, ports; ack; data offset, flags but PSH, window; options.
    if (p[off + 1] !== h[ho + 1] || (p[off + 6] ^ h[ho + 6]) & 0x40 || p[off + 8] !== h[ho + 8]) return false;
    for (let i = 12; i < 24; i++) if (p[off + i] !== h[ho + i]) return false;
    for (let i = 28; i < 36; i++) {
      if (p[off + i] !== h[ho + i] && !(i === 33 && ((p[off + i] ^ h[ho + i]) & ~PSH) === 0)) return false;
    }
    for (let i = 40; i < hl; i++) if (p[off + i] !== h[ho + i]) return false;
    const seq = ((p[off + 24] << 24) | (p[off + 25] << 16) | (p[off + 26] << 8) | p[off + 27]) >>> 0;
    return seq === this.#nextSeq;
  }

  /** Adds the IP packet `p[off .. off+len)`; `p[off-VNET_HDR_LEN .. off)` is headroom. */
  add(p: Uint8Array, off: number, len: number): void {
    let plen = this.#mergeable(p, off, len);
    if (plen > 0 && this.#segs > 0 && this.#continues(p, off, plen)) {
      // Only verified segments are merged (the held first one is verified when a second one comes).
      if (
        this.#first && !this.#firstOk && !(this.#firstOk = segmentOk(this.#first, this.#firstOff, this.#len))
      ) {
        // The held segment is corrupted: out on its own (the kernel drops it); `p` starts a new run.
        this.flush();
        this.#hold(p, off, len, plen);
        return;
      }
      if (segmentOk(p, off, len)) {
        this.#merge(p, off, len, plen);
        return;
      }
      plen = -1; // corrupted: the run goes out, then `p` on its own (the kernel drops it)
    }
    this.flush();
    if (plen <= 0) {
      p.fill(0, off - VNET_HDR_LEN, off);
      this.#sink.emit(off === VNET_HDR_LEN ? p : p.subarray(off - VNET_HDR_LEN), len + VNET_HDR_LEN, 1, len);
      return;
    }
    this.#hold(p, off, len, plen);
  }

  /** Appends `p[off..off+len)` (verified, continuing the held run, payload `plen`) to the run. */
  #merge(p: Uint8Array, off: number, len: number, plen: number): void {
    if (this.#first) {
      // Second segment: the held one moves to the scratch buffer.
      this.#out.set(this.#first.subarray(this.#firstOff, this.#firstOff + this.#len), VNET_HDR_LEN);
      this.#first = null;
    }
    this.#out.set(p.subarray(off + this.#hl, off + len), VNET_HDR_LEN + this.#len);
    this.#len += plen;
    this.#wire += len;
    this.#segs++;
    this.#nextSeq = (this.#nextSeq + plen) >>> 0;
    if (p[off + 33] & PSH) this.#out[VNET_HDR_LEN + 33] |= PSH;
    this.#open = plen === this.#mss && (p[off + 33] & PSH) === 0;
  }

  /** Holds `p[off..off+len)` (mergeable, payload `plen`) as the first segment of a new run. */
  #hold(p: Uint8Array, off: number, len: number, plen: number): void {
    this.#firstOk = false;
    this.#first = p;
    this.#firstOff = off;
    this.#len = len;
    this.#wire = len;
    this.#segs = 1;
    this.#mss = plen;
    this.#hl = len - plen;
    this.#nextSeq =
      (((p[off + 24] << 24) | (p[off + 25] << 16) | (p[off + 26] << 8) | p[off + 27]) + plen) >>>
      0;
    this.#open = (p[off + 33] & PSH) === 0;
  }

  /** Emits the held run (if any). Call at the end of every batch. */
  flush(): void {
    if (this.#segs === 0) return;
    const segs = this.#segs;
    this.#segs = 0;
    if (this.#first) {
      const p = this.#first, off = this.#firstOff;
      this.#first = null;
      p.fill(0, off - VNET_HDR_LEN, off);
      this.#sink.emit(
        off === VNET_HDR_LEN ? p : p.subarray(off - VNET_HDR_LEN),
        this.#len + VNET_HDR_LEN,
        1,
        this.#len,
      );
      return;
    }
    const b = this.#out, o = VNET_HDR_LEN, len = this.#len;
    put16(b, o + 2, len);
    ip4Csum(b, o);
    // NEEDS_CSUM: the TCP checksum field holds the pseudo-header sum (the kernel completes it).
    put16(b, o + 36, pseudo(b, o, len - 20, TCP));
    writeVnetHdr(b, 0, {
      flags: VNET_F_NEEDS_CSUM,
      gsoType: GSO_TCPV4,
      hdrLen: this.#hl,
      gsoSize: this.#mss,
      csumStart: 20,
      csumOffset: 16,
    });
    this.#sink.emit(b, len + VNET_HDR_LEN, segs, this.#wire);
  }
}
