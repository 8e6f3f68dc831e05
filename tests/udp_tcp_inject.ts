/**
 * A raw TCP-segment injector for the udp backend's tests (run inside a node's namespace by
 * tests/daemon_udp_csum_test.ts): crafted TCP/IPv4 segments, each the payload of one flannel UDP datagram,
 * sent from `src` to `dst:port` in pairs — each pair one UDP GSO send (UDP_SEGMENT), so that both datagrams
 * arrive together and the receiver's UDP_GRO reads them in one go (the coalescer then sees a run of two).
 * Args: `src dst port innerSrc innerDst pairs corrupt(0|1) firstPort`. Every segment: ACK only, 1000 bytes
 * of payload, to TCP port 9 (nothing listens: a kernel that accepts a segment answers with a RST); with
 * `corrupt` 1 one payload byte of each segment is changed after its checksum was computed.
 * @module
 */
import { bindUdp, sockaddrIn } from "../lib/backend/udp/udp_socket.ts";
import { libc } from "../lib/sys/ffi.ts";

const [src, dst, port, innerSrc, innerDst, pairs, corrupt, firstPort] = Deno.args;
const PAYLOAD = 1000, LEN = 40 + PAYLOAD;

function sum(b: Uint8Array, init = 0): number {
  let s = init;
  for (let i = 0; i < b.length; i += 2) s += (b[i] << 8) | (i + 1 < b.length ? b[i + 1] : 0);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

/** One TCP/IPv4 segment (ACK, `PAYLOAD` bytes) of flow `sport` at sequence `seq`. */
function segment(sport: number, seq: number, bad: boolean): Uint8Array {
  const p = new Uint8Array(LEN), v = new DataView(p.buffer);
  p.set([0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 6, 0, 0]);
  v.setUint16(2, LEN);
  p.set(innerSrc.split(".").map(Number), 12);
  p.set(innerDst.split(".").map(Number), 16);
  v.setUint16(10, ~sum(p.subarray(0, 20)) & 0xffff);
  v.setUint16(20, sport);
  v.setUint16(22, 9);
  v.setUint32(24, seq);
  v.setUint32(28, 0x1000);
  p[32] = 5 << 4;
  p[33] = 0x10;
  v.setUint16(34, 64000);
  for (let i = 40; i < LEN; i++) p[i] = (i * 7 + sport) & 0xff;
  v.setUint16(36, ~sum(p.subarray(20), sum(p.subarray(12, 20), 6 + LEN - 20)) & 0xffff);
  if (bad) p[40 + (sport % PAYLOAD)] ^= 0x5a;
  return p;
}

const fd = bindUdp(src, 0);
const L = libc();
const seg = new Int32Array([LEN]);
if (L.setsockopt(fd, 17, 103, new Uint8Array(seg.buffer), 4) !== 0) throw new Error("UDP_SEGMENT refused");
const to = sockaddrIn(dst, Number(port));
const buf = new Uint8Array(2 * LEN);
for (let i = 0; i < Number(pairs); i++) {
  const sport = Number(firstPort) + i, seq = 1_000_000 * (i + 1);
  buf.set(segment(sport, seq, corrupt === "1"), 0);
  buf.set(segment(sport, seq + PAYLOAD, corrupt === "1"), LEN);
  if (L.sendto(fd, buf, buf.length, 0, to, 16) !== buf.length) throw new Error(`sendto failed (pair ${i})`);
  await new Promise((r) => setTimeout(r, 5));
}
L.close(fd);
