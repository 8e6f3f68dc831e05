/**
 * A data-path worker of the UDP backend (run as a Web Worker). Role "tx": reads IP packets from the TUN
 * device, looks the destination up in the peer table and sends each packet unchanged (flannel's wire
 * format: the raw IP packet is the UDP payload) to the peer's PublicIP:Port. Role "rx": receives datagrams,
 * drops those from addresses holding no lease, whose inner source is outside the sender's subnets or
 * whose inner destination is not in our subnet, and writes the rest to the TUN device.
 *
 * Every syscall is a blocking FFI call on this worker's own thread: the event loop never sees a packet.
 * Both descriptors are non-blocking; an idle worker waits in poll() with a short timeout so that a stop
 * request (a flag in shared memory) is seen within ~200 ms. The peer table is read from shared memory
 * under a seqlock whenever its sequence number changes.
 * @module
 */
import { errno, libc } from "./ffi.ts";
import {
  CTL_COUNT,
  CTL_ENTRIES,
  CTL_OWN_MASK,
  CTL_OWN_NET,
  CTL_SEQ,
  CTL_STOP,
  ENTRY_WORDS,
  RX_STATS,
  STAT_SLOT,
  TX_STATS,
  type WorkerInit,
} from "./udp_layout.ts";

const EAGAIN = 11, EINTR = 4;
const POLLIN = 1, POLLOUT = 4;
const BUF = 65536;
const IDLE_POLL_MS = 200;

/** Bytes of one `struct mmsghdr` (x86-64/arm64: msghdr 56 + msg_len 4 + padding). */
const MMSG = 64;

/**
 * `n` mmsghdr slots, each with its own 16-byte address and one iovec of `BUF` bytes, pointers filled in
 * once (the buffers are large, off-heap and never move).
 */
function mmsgVec(n: number) {
  const vec = new Uint8Array(n * MMSG);
  const names = new Uint8Array(n * 16);
  const iovs = new Uint8Array(n * 16);
  const data = new Uint8Array(n * BUF);
  const v = new DataView(vec.buffer), iv = new DataView(iovs.buffer);
  const addr = (b: Uint8Array, off: number) =>
    BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b))) + BigInt(off);
  for (let i = 0; i < n; i++) {
    iv.setBigUint64(i * 16, addr(data, i * BUF), true);
    iv.setBigUint64(i * 16 + 8, BigInt(BUF), true);
    v.setBigUint64(i * MMSG, addr(names, i * 16), true);
    v.setUint32(i * MMSG + 8, 16, true);
    v.setBigUint64(i * MMSG + 16, addr(iovs, i * 16), true);
    v.setBigUint64(i * MMSG + 24, 1n, true);
  }
  return { vec, v, names, iovs, iv, data };
}

interface Table {
  /** Distinct masks, longest first. */
  masks: number[];
  /** Per mask: subnet network → sockaddr_in of the peer. */
  byNet: Map<number, Uint8Array<ArrayBuffer>>[];
  /** Peer public IP → its subnets as [net, mask, net, mask, …]. */
  bySrc: Map<number, number[]>;
  ownNet: number;
  ownMask: number;
}

function readTable(ctl: Int32Array, prev: Table | null): Table | null {
  const s1 = Atomics.load(ctl, CTL_SEQ);
  if (s1 & 1) return prev;
  const n = Atomics.load(ctl, CTL_COUNT);
  const masks: number[] = [];
  const byNet: Map<number, Uint8Array<ArrayBuffer>>[] = [];
  const bySrc = new Map<number, number[]>();
  for (let i = 0; i < n; i++) {
    const o = CTL_ENTRIES + i * ENTRY_WORDS;
    const net = ctl[o] >>> 0, mask = ctl[o + 1] >>> 0, ip = ctl[o + 2] >>> 0, port = ctl[o + 3];
    let mi = masks.indexOf(mask);
    if (mi < 0) {
      masks.push(mask);
      byNet.push(new Map());
      mi = masks.length - 1;
    }
    const sa = new Uint8Array(16);
    const v = new DataView(sa.buffer);
    v.setUint16(0, 2, true);
    v.setUint16(2, port, false);
    v.setUint32(4, ip, false);
    byNet[mi].set(net, sa);
    const l = bySrc.get(ip);
    if (l) l.push(net, mask);
    else bySrc.set(ip, [net, mask]);
  }
  const t: Table = {
    masks,
    byNet,
    bySrc,
    ownNet: ctl[CTL_OWN_NET] >>> 0,
    ownMask: ctl[CTL_OWN_MASK] >>> 0,
  };
  // Longest mask first, so the most specific subnet wins (as a route lookup would).
  const order = masks.map((m, i) => [m, i] as const).sort((a, b) => b[0] - a[0]);
  t.masks = order.map((x) => x[0]);
  t.byNet = order.map((x) => byNet[x[1]]);
  return Atomics.load(ctl, CTL_SEQ) === s1 ? t : prev;
}

/** The peer address for packet `buf[0..n)` (TTL decremented), or null when it is dropped (counted). */
function txRoute(
  t: Table,
  buf: Uint8Array,
  n: number,
  st: Float64Array,
  base: number,
): Uint8Array<ArrayBuffer> | null {
  if (n < 20 || (buf[0] >> 4) !== 4) {
    st[base + 3]++;
    return null;
  }
  const dst = ((buf[16] << 24) | (buf[17] << 16) | (buf[18] << 8) | buf[19]) >>> 0;
  let sa: Uint8Array<ArrayBuffer> | undefined;
  for (let i = 0; i < t.masks.length && !sa; i++) sa = t.byNet[i].get((dst & t.masks[i]) >>> 0);
  if (!sa) {
    st[base + 2]++;
    return null;
  }
  // One router hop: decrement TTL, patch the header checksum incrementally (RFC 1624).
  if (buf[8] <= 1) {
    st[base + 4]++;
    return null;
  }
  buf[8]--;
  let c = ((buf[10] << 8) | buf[11]) + 0x100;
  if (c > 0xffff) c = (c & 0xffff) + 1;
  buf[10] = c >> 8, buf[11] = c & 0xff;
  return sa;
}

/** True when datagram `buf[0..n)` from `src` may be written to the TUN device; else counts the drop. */
function rxAccept(t: Table | null, src: number, buf: Uint8Array, n: number, st: Float64Array, base: number) {
  const subs = t?.bySrc.get(src);
  if (!subs) {
    st[base + 2]++;
    return false;
  }
  if (n < 20 || (buf[0] >> 4) !== 4) {
    st[base + 3]++;
    return false;
  }
  const isrc = ((buf[12] << 24) | (buf[13] << 16) | (buf[14] << 8) | buf[15]) >>> 0;
  let ok = false;
  for (let i = 0; i < subs.length && !ok; i += 2) ok = ((isrc & subs[i + 1]) >>> 0) === subs[i];
  if (!ok) {
    st[base + 4]++;
    return false;
  }
  const idst = ((buf[16] << 24) | (buf[17] << 16) | (buf[18] << 8) | buf[19]) >>> 0;
  if (((idst & t!.ownMask) >>> 0) !== t!.ownNet) {
    st[base + 5]++;
    return false;
  }
  return true;
}

/** The TUN→UDP loop with sendmmsg: reads up to `batch` packets (until EAGAIN), sends them in one call. */
function runTxBatch(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
  const L = libc();
  const base = init.slot * STAT_SLOT;
  const m = mmsgVec(init.batch);
  const slots = Array.from({ length: init.batch }, (_, i) => m.data.subarray(i * BUF, (i + 1) * BUF));
  const pfd = new Uint8Array(8);
  const pv = new DataView(pfd.buffer);
  let seq = -1;
  let t: Table | null = null;
  while (Atomics.load(ctl, CTL_STOP) === 0) {
    const s = Atomics.load(ctl, CTL_SEQ);
    if (s !== seq) {
      const nt = readTable(ctl, t);
      if (nt !== t) (t = nt), (seq = s);
    }
    let k = 0, idle = false;
    while (k < init.batch) {
      const n = L.read(init.tunFd, slots[k], BUF);
      if (n < 0) {
        const e = errno();
        if (e === EAGAIN) idle = true;
        else if (e !== EINTR) {
          st[base + 6]++;
          L.poll(null, 0, 50);
        }
        break;
      }
      const sa = t && txRoute(t, slots[k], n, st, base);
      if (!sa) continue;
      m.names.set(sa, k * 16);
      m.iv.setBigUint64(k * 16 + 8, BigInt(n), true);
      k++;
    }
    let sent = 0;
    while (sent < k) {
      const r = L.sendmmsg(init.sockFd, m.vec.subarray(sent * MMSG), k - sent, 0);
      if (r < 0) {
        if (errno() === EAGAIN) {
          pv.setInt32(0, init.sockFd, true);
          pv.setInt16(4, POLLOUT, true);
          L.poll(pfd, 1, IDLE_POLL_MS);
          continue;
        }
        st[base + 5] += k - sent;
        break;
      }
      for (let i = sent; i < sent + r; i++) st[base + 1] += Number(m.iv.getBigUint64(i * 16 + 8, true));
      st[base] += r;
      sent += r;
    }
    if (k) st[base + 7]++;
    if (idle && k === 0) {
      pv.setInt32(0, init.tunFd, true);
      pv.setInt16(4, POLLIN, true);
      L.poll(pfd, 1, IDLE_POLL_MS);
    }
  }
}

/** The UDP→TUN loop with recvmmsg: up to `batch` datagrams per call, each written to the TUN device. */
function runRxBatch(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
  const L = libc();
  const base = init.slot * STAT_SLOT;
  const m = mmsgVec(init.batch);
  const slots = Array.from({ length: init.batch }, (_, i) => m.data.subarray(i * BUF, (i + 1) * BUF));
  const pfd = new Uint8Array(8);
  const pv = new DataView(pfd.buffer);
  pv.setInt32(0, init.sockFd, true);
  pv.setInt16(4, POLLIN, true);
  const nm = m.names;
  let seq = -1;
  let t: Table | null = null;
  while (Atomics.load(ctl, CTL_STOP) === 0) {
    const s = Atomics.load(ctl, CTL_SEQ);
    if (s !== seq) {
      const nt = readTable(ctl, t);
      if (nt !== t) (t = nt), (seq = s);
    }
    for (let i = 0; i < init.batch; i++) m.v.setUint32(i * MMSG + 8, 16, true);
    const r = L.recvmmsg(init.sockFd, m.vec, init.batch, 0, null);
    if (r < 0) {
      const e = errno();
      if (e === EAGAIN) L.poll(pfd, 1, IDLE_POLL_MS);
      else if (e !== EINTR) L.poll(null, 0, 50);
      continue;
    }
    st[base + 7]++;
    for (let i = 0; i < r; i++) {
      const n = m.v.getUint32(i * MMSG + 56, true);
      const o = i * 16;
      const src = ((nm[o + 4] << 24) | (nm[o + 5] << 16) | (nm[o + 6] << 8) | nm[o + 7]) >>> 0;
      if (!rxAccept(t, src, slots[i], n, st, base)) continue;
      if (L.write(init.tunFd, slots[i], n) < 0) st[base + 6]++;
      else {
        st[base]++;
        st[base + 1] += n;
      }
    }
  }
}

/** The TUN→UDP loop. */
function runTx(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
  const L = libc();
  const base = init.slot * STAT_SLOT;
  const [PK, BY, , , , SENDERR, READERR] = TX_STATS.map((_, i) => base + i);
  const buf = new Uint8Array(BUF);
  const pfd = new Uint8Array(8);
  const pv = new DataView(pfd.buffer);
  pv.setInt32(0, init.tunFd, true);
  const wait = (fd: number, ev: number, ms: number) => {
    pv.setInt32(0, fd, true);
    pv.setInt16(4, ev, true);
    L.poll(pfd, 1, ms);
  };
  let seq = -1;
  let t: Table | null = null;
  while (Atomics.load(ctl, CTL_STOP) === 0) {
    const s = Atomics.load(ctl, CTL_SEQ);
    if (s !== seq) {
      const nt = readTable(ctl, t);
      if (nt !== t) (t = nt), (seq = s);
    }
    const n = L.read(init.tunFd, buf, BUF);
    if (n < 0) {
      const e = errno();
      if (e === EAGAIN) wait(init.tunFd, POLLIN, IDLE_POLL_MS);
      else if (e !== EINTR) {
        st[READERR]++;
        L.poll(null, 0, 50); // the device is gone or broken: back off, the control thread repairs it
      }
      continue;
    }
    const sa = t && txRoute(t, buf, n, st, base);
    if (!sa) continue;
    let r = L.sendto(init.sockFd, buf, n, 0, sa, 16);
    if (r < 0 && errno() === EAGAIN) {
      wait(init.sockFd, POLLOUT, IDLE_POLL_MS);
      r = L.sendto(init.sockFd, buf, n, 0, sa, 16);
    }
    if (r < 0) st[SENDERR]++;
    else {
      st[PK]++;
      st[BY] += n;
    }
  }
}

/** The UDP→TUN loop. */
function runRx(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
  const L = libc();
  const base = init.slot * STAT_SLOT;
  const [PK, BY, , , , , WRITEERR] = RX_STATS.map((_, i) => base + i);
  const buf = new Uint8Array(BUF);
  const from = new Uint8Array(16);
  const fromLen = new Uint32Array(1);
  const fromLenB = new Uint8Array(fromLen.buffer);
  const pfd = new Uint8Array(8);
  const pv = new DataView(pfd.buffer);
  pv.setInt32(0, init.sockFd, true);
  pv.setInt16(4, POLLIN, true);
  let seq = -1;
  let t: Table | null = null;
  while (Atomics.load(ctl, CTL_STOP) === 0) {
    const s = Atomics.load(ctl, CTL_SEQ);
    if (s !== seq) {
      const nt = readTable(ctl, t);
      if (nt !== t) (t = nt), (seq = s);
    }
    fromLen[0] = 16;
    const n = L.recvfrom(init.sockFd, buf, BUF, 0, from, fromLenB);
    if (n < 0) {
      const e = errno();
      if (e === EAGAIN) L.poll(pfd, 1, IDLE_POLL_MS);
      else if (e !== EINTR) L.poll(null, 0, 50);
      continue;
    }
    const src = ((from[4] << 24) | (from[5] << 16) | (from[6] << 8) | from[7]) >>> 0;
    if (!rxAccept(t, src, buf, n, st, base)) continue;
    if (L.write(init.tunFd, buf, n) < 0) st[WRITEERR]++;
    else {
      st[PK]++;
      st[BY] += n;
    }
  }
}

/** The worker's global scope (typed here: the project is checked with the window lib). */
const scope = globalThis as unknown as {
  onmessage: ((ev: MessageEvent<WorkerInit>) => void) | null;
  postMessage(m: unknown): void;
  close(): void;
};

scope.onmessage = (ev: MessageEvent<WorkerInit>) => {
  const init = ev.data;
  const ctl = new Int32Array(init.ctl);
  const st = new Float64Array(init.stats);
  libc(); // load before saying ready: a missing libc fails here, visibly
  scope.postMessage({ ready: true });
  try {
    if (init.role === "tx") (init.batch > 1 ? runTxBatch : runTx)(init, ctl, st);
    else (init.batch > 1 ? runRxBatch : runRx)(init, ctl, st);
    scope.postMessage({ stopped: true });
  } catch (e) {
    scope.postMessage({ error: e instanceof Error ? e.message : String(e) });
  }
  scope.close();
};
