import { assert, assertEquals } from "../../../tests/assert.ts";
import {
  Coalescer,
  completeCsum,
  csum,
  GSO_TCPV4,
  readVnetHdr,
  tsoSplit,
  VNET_F_NEEDS_CSUM,
  VNET_HDR_LEN,
} from "./gso.ts";

/** RFC 1071 the slow way: big-endian 16-bit words, odd byte padded. */
function refSum(b: Uint8Array, init = 0): number {
  let s = init;
  for (let i = 0; i < b.length; i += 2) s += (b[i] << 8) | (i + 1 < b.length ? b[i + 1] : 0);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

const be16 = (b: Uint8Array, o: number) => (b[o] << 8) | b[o + 1];
const be32 = (b: Uint8Array, o: number) =>
  ((b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]) >>> 0;

/** True when the TCP checksum of IP packet `p` verifies (pseudo header included). */
function tcpOk(p: Uint8Array): boolean {
  const v4 = (p[0] >> 4) === 4;
  const ihl = v4 ? (p[0] & 15) * 4 : 40;
  const l4 = p.subarray(ihl);
  const ph = v4
    ? refSum(p.subarray(12, 20), 6 + l4.length)
    : refSum(p.subarray(8, 40), 6 + (l4.length >>> 16) + (l4.length & 0xffff));
  return refSum(l4, ph) === 0xffff;
}

/** A TCP packet: IPv4 (id 0x1234, DF, TTL 64) or IPv6, 12 bytes of options, `payload` bytes of data. */
function tcpPacket(v6: boolean, payload: Uint8Array, seq: number, flags: number): Uint8Array {
  const ihl = v6 ? 40 : 20, thl = 32;
  const p = new Uint8Array(ihl + thl + payload.length);
  const dv = new DataView(p.buffer);
  if (v6) {
    p[0] = 0x60;
    dv.setUint16(4, thl + payload.length);
    p[6] = 6;
    p[7] = 64;
    p.set([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 8);
    p.set([0xfd, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2], 24);
  } else {
    p.set([0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 244, 1, 2, 10, 244, 2, 3]);
    dv.setUint16(2, p.length);
    dv.setUint16(10, ~refSum(p.subarray(0, 20)) & 0xffff);
  }
  const t = ihl;
  dv.setUint16(t, 40000);
  dv.setUint16(t + 2, 5201);
  dv.setUint32(t + 4, seq);
  dv.setUint32(t + 8, 0xabcdef01);
  p[t + 12] = (thl / 4) << 4;
  p[t + 13] = flags;
  dv.setUint16(t + 14, 501);
  p.set([1, 1, 8, 10, 0, 0, 1, 2, 0, 0, 3, 4], t + 20); // NOP NOP timestamps
  p.set(payload, ihl + thl);
  const l4 = p.subarray(t);
  const ph = v6 ? refSum(p.subarray(8, 40), 6 + l4.length) : refSum(p.subarray(12, 20), 6 + l4.length);
  dv.setUint16(t + 16, ~refSum(l4, ph) & 0xffff);
  return p;
}

/** `b` (a segment after VNET_HDR_LEN bytes of headroom) with its IPv4 and TCP checksums made right again. */
function refix(b: Uint8Array): Uint8Array {
  const p = b.subarray(VNET_HDR_LEN), dv = new DataView(p.buffer, p.byteOffset);
  dv.setUint16(10, 0);
  dv.setUint16(10, ~refSum(p.subarray(0, 20)) & 0xffff);
  dv.setUint16(36, 0);
  dv.setUint16(36, ~refSum(p.subarray(20), refSum(p.subarray(12, 20), 6 + p.length - 20)) & 0xffff);
  return b;
}

const rand = (n: number) => {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(b.subarray(i, Math.min(n, i + 65536)));
  return b;
};

Deno.test("csum: equals RFC 1071 at every alignment and length", () => {
  const buf = rand(3000);
  for (const off of [0, 1, 2, 3, 5, 6, 7]) {
    for (const len of [0, 1, 2, 3, 4, 5, 19, 20, 1399, 1400, 2990]) {
      const ref = refSum(buf.subarray(off, off + len));
      assertEquals(csum(buf, off, len), ref, `off ${off} len ${len}`);
      assertEquals(csum(buf.subarray(off), 0, len), ref, `view at ${off}, len ${len}`);
      assertEquals(csum(buf, off, len, 0x1234), refSum(buf.subarray(off, off + len), 0x1234));
    }
  }
  const big = rand(200_001);
  for (const off of [0, 1, 3]) {
    assertEquals(csum(big, off, 200_000 - off), refSum(big.subarray(off, 200_000)), `> 64 KiB at ${off}`);
  }
});

for (const v6 of [false, true]) {
  Deno.test(`tsoSplit: a GSO TCP/IPv${v6 ? 6 : 4} packet becomes MSS segments, headers and checksums right`, () => {
    const mss = 1400, data = rand(10 * mss + 123);
    const flags = 0x18 | 0x01 | 0x80; // ACK PSH FIN CWR
    const big = tcpPacket(v6, data, 0xfffff000, flags); // the sequence wraps
    const src = new Uint8Array(big.length + 3);
    src.set(big, 3);
    const out = new Uint8Array(100_000);
    const lens = new Uint32Array(64);
    const n = tsoSplit(src, 3, big.length, mss, out, 7, lens);
    assertEquals(n, 11);
    const hl = (v6 ? 40 : 20) + 32;
    let o = 7, got = 0;
    for (let i = 0; i < n; i++) {
      const seg = out.subarray(o, o + lens[i]);
      const plen: number = i < n - 1 ? mss : 123;
      assertEquals(seg.length, hl + plen);
      if (v6) assertEquals(be16(seg, 4), 32 + plen, "payload length");
      else {
        assertEquals(be16(seg, 2), seg.length, "total length");
        assertEquals(be16(seg, 4), 0x1234 + i, "id");
        assertEquals(refSum(seg.subarray(0, 20)), 0xffff, "IPv4 header checksum");
        assertEquals(seg[6], 0x40, "DF kept");
      }
      const t = v6 ? 40 : 20;
      assertEquals(be32(seg, t + 4), (0xfffff000 + i * mss) >>> 0, "seq");
      assertEquals(be32(seg, t + 8), 0xabcdef01, "ack");
      const f = seg[t + 13];
      assertEquals((f & 0x09) !== 0, i === n - 1, "FIN/PSH only on the last");
      assertEquals((f & 0x80) !== 0, i === 0, "CWR only on the first");
      assert((f & 0x10) !== 0, "ACK on every segment");
      assertEquals(seg.subarray(t + 20, t + 32), big.subarray(t + 20, t + 32), "options copied");
      assert(tcpOk(seg), `TCP checksum of segment ${i}`);
      assertEquals(seg.subarray(hl), data.subarray(got, got + plen));
      got += plen;
      o += lens[i];
    }
    assertEquals(got, data.length);
  });
}

Deno.test("tsoSplit: refuses what it cannot cut", () => {
  const out = new Uint8Array(70_000), lens = new Uint32Array(64);
  const p = tcpPacket(false, rand(5000), 1, 0x10);
  const udp = p.slice();
  udp[9] = 17;
  assertEquals(tsoSplit(udp, 0, udp.length, 1400, out, 0, lens), -1, "not TCP");
  assertEquals(tsoSplit(p, 0, 30, 1400, out, 0, lens), -1, "truncated");
  assertEquals(tsoSplit(p, 0, p.length, 0, out, 0, lens), -1, "mss 0");
  assertEquals(tsoSplit(p, 0, p.length, 10, out, 0, lens), -1, "more segments than lens");
});

Deno.test("completeCsum: a NEEDS_CSUM packet without GSO gets its TCP checksum", () => {
  const p = tcpPacket(false, rand(777), 42, 0x18);
  const want = be16(p, 36);
  // What the kernel hands over: the pseudo-header sum (not complemented) in the checksum field.
  const l4len = p.length - 20;
  const partial = refSum(p.subarray(12, 20), 6 + l4len);
  p[36] = partial >> 8, p[37] = partial & 0xff;
  const buf = new Uint8Array(p.length + 10);
  buf.set(p, 10);
  assert(completeCsum(buf, 10, p.length, 20, 16));
  assertEquals(be16(buf, 46), want);
  assert(tcpOk(buf.subarray(10)));
  assert(!completeCsum(buf, 10, p.length, 20, p.length), "offset past the end");
});

/** MSS segments of one flow, each with VNET_HDR_LEN bytes of headroom, as the receive worker holds them. */
function segments(data: Uint8Array, mss: number, seq: number, lastFlags = 0x18): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let o = 0; o < data.length; o += mss) {
    const last = o + mss >= data.length;
    const p = tcpPacket(
      false,
      data.subarray(o, Math.min(data.length, o + mss)),
      seq + o,
      last ? lastFlags : 0x10,
    );
    const b = new Uint8Array(VNET_HDR_LEN + p.length);
    b.fill(0xee, 0, VNET_HDR_LEN); // headroom garbage: must be overwritten
    b.set(p, VNET_HDR_LEN);
    out.push(b);
  }
  return out;
}

interface Emitted {
  frame: Uint8Array;
  segs: number;
}

function run(pkts: Uint8Array[]): Emitted[] {
  const got: Emitted[] = [];
  let wire = 0;
  const c = new Coalescer(new Uint8Array(VNET_HDR_LEN + 65535), {
    emit(b, len, segs, bytes) {
      got.push({ frame: b.slice(0, len), segs });
      wire += bytes;
    },
  });
  for (const p of pkts) c.add(p, VNET_HDR_LEN, p.length - VNET_HDR_LEN);
  c.flush();
  assertEquals(wire, pkts.reduce((x, p) => x + p.length - VNET_HDR_LEN, 0), "bytes as they came");
  return got;
}

Deno.test("Coalescer: consecutive segments of a flow become one GSO super-packet that splits back", () => {
  const mss = 1400, data = rand(20 * mss + 500);
  const segs = segments(data, mss, 1000);
  const got = run(segs);
  assertEquals(got.length, 1);
  assertEquals(got[0].segs, 21);
  const h = readVnetHdr(got[0].frame);
  assertEquals(h, {
    flags: VNET_F_NEEDS_CSUM,
    gsoType: GSO_TCPV4,
    hdrLen: 52,
    gsoSize: mss,
    csumStart: 20,
    csumOffset: 16,
  });
  const ip = got[0].frame.subarray(VNET_HDR_LEN);
  assertEquals(be16(ip, 2), ip.length);
  assertEquals(refSum(ip.subarray(0, 20)), 0xffff, "IPv4 header checksum");
  assertEquals(ip[33] & 0x08, 0x08, "PSH of the last segment kept");
  assertEquals(ip.subarray(52), data);
  // The checksum field holds the pseudo-header sum: completing it gives a valid packet.
  assertEquals(be16(ip, 36), refSum(ip.subarray(12, 20), 6 + ip.length - 20));
  const copy = ip.slice();
  assert(completeCsum(copy, 0, copy.length, 20, 16));
  assert(tcpOk(copy));
  // And a TSO split of it gives back the wire segments (bar the IP ids, which the merge does not keep).
  const out = new Uint8Array(80_000), lens = new Uint32Array(64);
  assertEquals(tsoSplit(copy, 0, copy.length, mss, out, 0, lens), 21);
  let o = 0;
  for (let i = 0; i < 21; i++) {
    const want = segs[i].subarray(VNET_HDR_LEN);
    const seg = out.subarray(o, o + lens[i]);
    assertEquals(seg.subarray(20), want.subarray(20), `TCP part of segment ${i}`);
    o += lens[i];
  }
});

Deno.test("Coalescer: runs end at a gap, another flow, a short segment, PSH or 64 KiB; others pass as they are", () => {
  const mss = 1000;
  const a = segments(rand(5 * mss), mss, 0, 0x10);
  // A gap: the 4th segment is missing.
  let got = run([a[0], a[1], a[2], a[4]]);
  assertEquals(got.map((g) => g.segs), [3, 1]);
  assertEquals(readVnetHdr(got[1].frame).gsoType, 0, "a lone segment goes out with a zero header");
  assertEquals(got[1].frame.subarray(0, VNET_HDR_LEN), new Uint8Array(VNET_HDR_LEN));
  // Another flow in between (other port), and a pure ACK (no payload).
  const other = a[2].slice();
  other[VNET_HDR_LEN + 21] ^= 1;
  refix(other);
  const ack = tcpPacket(false, new Uint8Array(0), 7, 0x10);
  const ackb = new Uint8Array(VNET_HDR_LEN + ack.length);
  ackb.set(ack, VNET_HDR_LEN);
  got = run([a[0], a[1], other, ackb, a[3], a[4]]);
  assertEquals(got.map((g) => g.segs), [2, 1, 1, 2]);
  assertEquals(got[2].frame.subarray(VNET_HDR_LEN), ack, "the ACK unchanged");
  // A short segment closes a run; PSH on a segment closes it after that segment.
  const s = segments(rand(2 * mss + 10), mss, 0, 0x10);
  const b = segments(rand(3 * mss), mss, 2 * mss + 10, 0x10);
  got = run([...s, ...b]);
  assertEquals(got.map((g) => g.segs), [3, 3]);
  const p = segments(rand(4 * mss), mss, 0, 0x10);
  p[1][VNET_HDR_LEN + 33] |= 0x08;
  refix(p[1]);
  got = run(p);
  assertEquals(got.map((g) => g.segs), [2, 2]);
  // A window change, an ack change: not merged (as Linux GRO).
  const w = segments(rand(3 * mss), mss, 0, 0x10);
  w[1][VNET_HDR_LEN + 35] ^= 1;
  w[2][VNET_HDR_LEN + 31] ^= 1;
  refix(w[1]), refix(w[2]);
  assertEquals(run(w).map((g) => g.segs), [1, 1, 1]);
  // 64 KiB at most.
  const many = segments(rand(100 * 1400), 1400, 0, 0x10);
  got = run(many);
  assert(got.every((g) => g.frame.length - VNET_HDR_LEN <= 65535));
  assertEquals(got.reduce((x, g) => x + g.segs, 0), 100);
  assertEquals(got[0].segs, Math.floor((65535 - 52) / 1400));
  // A UDP packet passes unchanged, with a zero header.
  const u = a[0].slice();
  u[VNET_HDR_LEN + 9] = 17;
  got = run([u]);
  assertEquals(got[0].frame.subarray(VNET_HDR_LEN), u.subarray(VNET_HDR_LEN));
  assertEquals(got[0].frame.subarray(0, VNET_HDR_LEN), new Uint8Array(VNET_HDR_LEN));
});

Deno.test("Coalescer: merges only segments whose checksums verify; corrupted ones go out unmerged, unchanged", () => {
  const mss = 1000;
  const flip = (p: Uint8Array, at: number) => {
    const q = p.slice();
    q[VNET_HDR_LEN + at] ^= 0x40;
    return q;
  };
  const a = segments(rand(5 * mss), mss, 0, 0x10);
  // The 3rd segment's payload corrupted: the run so far goes out, the bad one alone, the rest merged.
  const bad = flip(a[2], 52 + 17);
  let got = run([a[0], a[1], bad, a[3], a[4]]);
  assertEquals(got.map((g) => g.segs), [2, 1, 2]);
  assertEquals(got[1].frame.subarray(VNET_HDR_LEN), bad.subarray(VNET_HDR_LEN), "written as it came");
  assertEquals(got[1].frame.subarray(0, VNET_HDR_LEN), new Uint8Array(VNET_HDR_LEN), "no NEEDS_CSUM");
  assert(!tcpOk(got[1].frame.subarray(VNET_HDR_LEN)), "the kernel sees a bad checksum");
  for (const g of [got[0], got[2]]) {
    const ip = g.frame.subarray(VNET_HDR_LEN).slice();
    assert(completeCsum(ip, 0, ip.length, 20, 16));
    assert(tcpOk(ip), "merged runs hold only verified data");
  }
  // The first segment of a run corrupted: it goes out alone, the next one starts the run.
  got = run([flip(a[0], 60), a[1], a[2]]);
  assertEquals(got.map((g) => g.segs), [1, 2]);
  // A corrupted IPv4 header checksum (the id changed) is not merged either; nor a pair both corrupted.
  const id = a[1].slice();
  id[VNET_HDR_LEN + 4] ^= 1;
  assertEquals(run([a[0], id, a[2]]).map((g) => g.segs), [1, 1, 1]);
  assertEquals(run([flip(a[0], 70), flip(a[1], 70)]).map((g) => g.segs), [1, 1]);
  // 50 corrupted pairs: not one merged.
  for (let i = 0; i < 50; i++) {
    const s = segments(rand(2 * mss), mss, i * 7919, 0x10);
    assertEquals(run([flip(s[0], 52 + i), flip(s[1], 52 + 2 * i)]).map((g) => g.segs), [1, 1]);
  }
});
