/**
 * Per-packet cost profile of the UDP backend's data path (lib/backend/udp/udp_worker.ts), without perf: timing
 * loops of the JS work a worker does per packet (route lookup with TTL/checksum patch, iovec length write
 * as BigInt or as a 32-bit word, a subarray per partial sendmmsg) against the reference measured in the same
 * run, the cost of one blocking-style FFI syscall (read/poll/recvmmsg on an empty non-blocking socket that
 * is never bound: no traffic, no kernel state). Prints ns per operation and the ratio to one syscall.
 * Env: COST_OPS (iterations per row, default 200000).
 * @module
 */
import { libc } from "../lib/sys/ffi.ts";

const N = Number(Deno.env.get("COST_OPS") ?? 200000);
const L = libc();

/** Median ns per call of `f` over 5 timed loops of N calls (after a warm-up loop). */
function ns(f: () => void): number {
  for (let i = 0; i < 20000; i++) f();
  const runs: number[] = [];
  for (let r = 0; r < 5; r++) {
    const s = performance.now();
    for (let i = 0; i < N; i++) f();
    runs.push((performance.now() - s) * 1e6 / N);
  }
  return runs.sort((a, b) => a - b)[2];
}

const AF_INET = 2, SOCK_DGRAM = 2, SOCK_NONBLOCK = 0o4000, POLLIN = 1;
const fd = L.socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
if (fd < 0) throw new Error("socket() failed");
try {
  const buf = new Uint8Array(2048);
  const vec = new Uint8Array(64 * 32);
  const pfd = new Uint8Array(8);
  const pv = new DataView(pfd.buffer);
  pv.setInt32(0, fd, true);
  pv.setInt16(4, POLLIN, true);
  const iv = new DataView(new ArrayBuffer(16 * 32));
  const peers = new Map<number, Uint8Array>([[0x0af40200, new Uint8Array(16)]]);
  const pk = new Uint8Array(1400);
  pk.set([0x45, 0, 0, 0, 0, 0, 0, 0, 64], 0);
  pk.set([10, 244, 2, 5], 16);
  let k = 0;
  const syscall = ns(() => L.read(fd, buf, buf.length));
  const rows: [string, number][] = [
    ["FFI read() -> EAGAIN (reference)", syscall],
    ["FFI poll(1 fd, 0 ms)", ns(() => L.poll(pfd, 1, 0))],
    ["FFI recvmmsg(32 slots) -> EAGAIN", ns(() => L.recvmmsg(fd, vec, 32, 0, null))],
    [
      "route lookup + TTL/checksum patch",
      ns(() => {
        const dst = ((pk[16] << 24) | (pk[17] << 16) | (pk[18] << 8) | pk[19]) >>> 0;
        if (!peers.get((dst & 0xffffff00) >>> 0)) throw new Error("no route");
        pk[8] = 64;
        let c = ((pk[10] << 8) | pk[11]) + 0x100;
        if (c > 0xffff) c = (c & 0xffff) + 1;
        pk[10] = c >> 8, pk[11] = c & 0xff;
      }),
    ],
    [
      "iov_len setBigUint64(BigInt(n))",
      ns(() => iv.setBigUint64((k++ & 31) * 16 + 8, BigInt(1400 + (k & 7)), true)),
    ],
    ["iov_len setUint32(n)", ns(() => iv.setUint32((k++ & 31) * 16 + 8, 1400 + (k & 7), true))],
    ["mmsghdr vector subarray", ns(() => vec.subarray((k++ & 31) * 64))],
  ];
  console.log(`per-operation cost, median of 5 loops of ${N}`);
  for (const [name, v] of rows) {
    console.log(
      `  ${name.padEnd(36)} ${v.toFixed(0).padStart(6)} ns   ${(v / syscall).toFixed(3)}× one syscall`,
    );
  }
} finally {
  L.close(fd);
}
