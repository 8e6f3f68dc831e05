/**
 * The receive side of the udp data path (UDP → TUN): datagrams from addresses holding no lease, with an
 * inner source outside the sender's subnets or an inner destination outside ours are dropped, the rest
 * written to flannel0 — one recvfrom per datagram ({@link runRx}), recvmmsg batches ({@link runRxBatch}) or,
 * with offloads, UDP_GRO reads and coalesced TCP segments ({@link RxOffloadLoop}) — and, with `steal`, the
 * receive worker reading the replies its writes caused from flannel0 itself ({@link Stealer}).
 * @module
 */
import { errno, libc } from "../../../sys/ffi.ts";
import { Coalescer, type PacketSink, VNET_HDR_LEN } from "../gso.ts";
import { CTL_STOP, RX_STATS, STAT_SLOT, STEAL_SLOT, TUN_FREE, type WorkerInit } from "../udp_layout.ts";
import {
  BUF,
  Burst,
  CMSG,
  EAGAIN,
  EINTR,
  IDLE_POLL_MS,
  MMSG,
  mmsgVec,
  POLLIN,
  pollIn,
  SOL_UDP,
  STEAL_MAX,
  type Table,
  TableView,
  TunToken,
  type TxPath,
  UDP_GRO,
} from "./common.ts";
import { txPath } from "./tx.ts";

/**
 * True when datagram `buf[o..o+n)` from `src` may be written to the TUN device; else counts the drop.
 */
export function rxAccept(
  t: Table | null,
  src: number,
  buf: Uint8Array,
  n: number,
  st: Float64Array,
  base: number,
  o = 0,
) {
  const subs = t?.bySrc.get(src);
  if (!subs) {
    st[base + 2]++;
    return false;
  }
  if (n < 20 || (buf[o] >> 4) !== 4) {
    st[base + 3]++;
    return false;
  }
  const isrc = (buf[o + 12] << 24) | (buf[o + 13] << 16) | (buf[o + 14] << 8) | buf[o + 15];
  let ok = false;
  for (let i = 0; i < subs.length && !ok; i += 2) ok = (isrc & subs[i + 1]) === subs[i];
  if (!ok) {
    st[base + 4]++;
    return false;
  }
  const idst = (buf[o + 16] << 24) | (buf[o + 17] << 16) | (buf[o + 18] << 8) | buf[o + 19];
  if ((idst & t!.ownMask) !== t!.ownNet) {
    st[base + 5]++;
    return false;
  }
  return true;
}

/**
 * The receive worker's part with `steal`: it reads the TUN device while the transmit worker does not
 * ({@link TunToken}) — after every receive batch (the kernel, in this thread's softirq, usually has
 * queued the reply to what it wrote — an echo reply, a TCP ACK — on the TUN before write() returns) and
 * while idle (the TUN device is in its poll set). At most {@link STEAL_MAX} reads each time; finding more waiting it hands the
 * TUN device over to the transmit worker.
 */
export class Stealer {
  readonly #init: WorkerInit;
  readonly #token: TunToken;
  readonly #path: TxPath;
  readonly #table: TableView;
  readonly #pfd = new Uint8Array(24);
  readonly #pv = new DataView(this.#pfd.buffer);
  readonly #drain = new Uint8Array(8);
  constructor(init: WorkerInit, ctl: Int32Array, st: Float64Array) {
    this.#init = init;
    this.#token = new TunToken(ctl, init.wakeFd);
    this.#table = new TableView(ctl);
    const base = STEAL_SLOT * STAT_SLOT;
    this.#path = txPath(init, st, base, STEAL_MAX);
    const pv = this.#pv;
    [init.sockFd, init.tunFd, init.wakeFd].forEach((fd, i) => {
      pv.setInt32(i * 8, fd, true);
      pv.setInt16(i * 8 + 4, POLLIN, true);
    });
  }
  /** Takes and sends what is waiting on the TUN device, if the token is free. */
  run(): void {
    const t = this.#table.current(); // now: the peer table may have changed while this worker slept
    if (!this.#token.tryTakeRx()) return;
    let b = Burst.EMPTY;
    try {
      b = this.#path.burst(t, STEAL_MAX);
      this.#path.flush();
    } finally {
      this.#token.releaseRx(b === Burst.FULL);
    }
    if (b === Burst.ERROR) libc().poll(null, 0, 50); // the device is broken: the control thread repairs it
  }
  /**
   * The idle wait of the receive worker (its socket had nothing): poll() on the socket, the wake-up
   * eventfd and — while the token is free — the TUN device, whose packets it then sends.
   */
  idle(): void {
    const pv = this.#pv, L = libc();
    pv.setInt32(8, this.#token.holder === TUN_FREE ? this.#init.tunFd : -1, true);
    if (L.poll(this.#pfd, 3, IDLE_POLL_MS) <= 0) return;
    if (pv.getInt16(22, true) !== 0) L.read(this.#init.wakeFd, this.#drain, 8);
    if (pv.getInt16(14, true) !== 0) this.run();
  }
}

/**
 * After a failed receive call of an RX loop: on EAGAIN waits for the socket (the stealer's poll, which
 * also serves flannel0 while it holds it, or a plain poll of `pfd`); on another error but EINTR backs off
 * 50 ms.
 */
export function rxWait(steal: Stealer | null, pfd: Uint8Array<ArrayBuffer>): void {
  const e = errno();
  if (e === EAGAIN) {
    if (steal) steal.idle();
    else libc().poll(pfd, 1, IDLE_POLL_MS);
  } else if (e !== EINTR) libc().poll(null, 0, 50);
}

/** Indexes in a receive stat slot (RX_STATS), for the three receive loops. */
export const [RX_PK, RX_BY, , , , , RX_WRITEERR, RX_BATCHES, RX_COALESCED, RX_CSEGS, RX_GROREADS] = RX_STATS
  .map((
    _,
    i,
  ) => i);

/** The UDP→TUN loop with recvmmsg: up to `batch` datagrams per call, each written to the TUN device. */
export function runRxBatch(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
  const L = libc();
  const base = init.slot * STAT_SLOT;
  const m = mmsgVec(init.batch);
  const slots = m.slots;
  const pfd = pollIn(init.sockFd);
  const nm = m.names;
  const table = new TableView(ctl);
  const steal = init.steal ? new Stealer(init, ctl, st) : null;
  while (Atomics.load(ctl, CTL_STOP) === 0) {
    const t = table.current();
    for (let i = 0; i < init.batch; i++) m.v.setUint32(i * MMSG + 8, 16, true);
    const r = L.recvmmsg(init.sockFd, m.vec, init.batch, 0, null);
    if (r < 0) {
      rxWait(steal, pfd);
      continue;
    }
    st[base + RX_BATCHES]++;
    for (let i = 0; i < r; i++) {
      const n = m.v.getUint32(i * MMSG + 56, true);
      const o = i * 16;
      const src = (nm[o + 4] << 24) | (nm[o + 5] << 16) | (nm[o + 6] << 8) | nm[o + 7];
      if (!rxAccept(t, src, slots[i], n, st, base)) continue;
      if (L.write(init.tunFd, slots[i], n) < 0) st[base + RX_WRITEERR]++;
      else {
        st[base + RX_PK]++;
        st[base + RX_BY] += n;
      }
    }
    steal?.run(); // after every batch: a flood of dropped datagrams must not keep flannel0 unread
  }
}

/**
 * The UDP→TUN loop on an IFF_VNET_HDR TUN: recvmmsg into slots with room for the virtio_net_hdr; with
 * `coalesce` the accepted datagrams of one batch go through gso.ts's Coalescer (runs of one TCP flow
 * written as one GSO super-packet), else each is written with a zero header. Flushed at every batch end.
 */
export function runRxOffload(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
  turnUntilStopped(new RxOffloadLoop(init, ctl, st), ctl);
}

/**
 * The state and one turn of {@link runRxOffload}'s loop. A class, not closures in the loop function: V8
 * compiles {@link turn} (and the methods it calls) as functions shared by every instance, so what the
 * warm-up's instance made hot is the code the serving instance runs from its first packet (a closure made
 * per call, or a loop compiled on-stack in one call, would start cold again).
 */
export class RxOffloadLoop implements PacketSink {
  readonly #init: WorkerInit;
  readonly #st: Float64Array;
  readonly #base: number;
  readonly #m: ReturnType<typeof mmsgVec>;
  readonly #cv: DataView;
  readonly #pfd: Uint8Array<ArrayBuffer>;
  readonly #co: Coalescer | null;
  readonly #table: TableView;
  readonly #steal: Stealer | null;

  constructor(init: WorkerInit, ctl: Int32Array, st: Float64Array) {
    this.#init = init, this.#st = st, this.#base = init.slot * STAT_SLOT;
    const m = this.#m = mmsgVec(init.batch, VNET_HDR_LEN);
    // UDP_GRO: one control message per slot, the kernel says there how big each datagram of the read is.
    const ctrl = new Uint8Array(init.batch * CMSG);
    this.#cv = new DataView(ctrl.buffer);
    if (init.udpGro) {
      const ca = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(ctrl)));
      for (let i = 0; i < init.batch; i++) m.v.setBigUint64(i * MMSG + 32, ca + BigInt(i * CMSG), true);
    }
    this.#pfd = pollIn(init.sockFd);
    this.#co = init.coalesce ? new Coalescer(new Uint8Array(VNET_HDR_LEN + 65535), this) : null;
    this.#table = new TableView(ctl);
    this.#steal = init.steal ? new Stealer(init, ctl, st) : null;
  }

  /** Writes a packet (`b[0..len)`: virtio_net_hdr and packet) to the TUN device, counted. */
  emit(b: Uint8Array, len: number, segments: number, wireBytes: number): void {
    const st = this.#st, base = this.#base;
    if (libc().write(this.#init.tunFd, b, len) < 0) st[base + RX_WRITEERR] += segments;
    else {
      st[base + RX_PK] += segments;
      st[base + RX_BY] += wireBytes;
      if (segments > 1) {
        st[base + RX_COALESCED]++;
        st[base + RX_CSEGS] += segments;
      }
    }
  }

  /** One datagram at `slot[off..off+n)` (VNET_HDR_LEN bytes before it are free or already written out). */
  #one(slot: Uint8Array, off: number, n: number, src: number, t: Table | null): void {
    if (!rxAccept(t, src, slot, n, this.#st, this.#base, off)) return;
    if (this.#co) this.#co.add(slot, off, n);
    else {
      slot.fill(0, off - VNET_HDR_LEN, off);
      this.emit(off === VNET_HDR_LEN ? slot : slot.subarray(off - VNET_HDR_LEN), n + VNET_HDR_LEN, 1, n);
    }
  }

  /** One receive batch written out (then the steal), or the wait when the socket had nothing. */
  turn(): void {
    const init = this.#init, m = this.#m, cv = this.#cv, nm = m.names, slots = m.slots;
    const t = this.#table.current();
    for (let i = 0; i < init.batch; i++) {
      m.v.setUint32(i * MMSG + 8, 16, true);
      if (init.udpGro) m.v.setUint32(i * MMSG + 40, CMSG, true);
    }
    const r = libc().recvmmsg(init.sockFd, m.vec, init.batch, 0, null);
    if (r < 0) {
      rxWait(this.#steal, this.#pfd);
      return;
    }
    this.#st[this.#base + RX_BATCHES]++;
    for (let i = 0; i < r; i++) {
      const n = m.v.getUint32(i * MMSG + 56, true);
      const o = i * 16;
      const src = (nm[o + 4] << 24) | (nm[o + 5] << 16) | (nm[o + 6] << 8) | nm[o + 7];
      let size = 0;
      if (
        init.udpGro && m.v.getUint32(i * MMSG + 40, true) >= 20 &&
        cv.getInt32(i * CMSG + 8, true) === SOL_UDP &&
        cv.getInt32(i * CMSG + 12, true) === UDP_GRO
      ) size = cv.getInt32(i * CMSG + 16, true);
      if (size <= 0 || size >= n) this.#one(slots[i], VNET_HDR_LEN, n, src, t);
      else {
        // Several datagrams back to back, each `size` bytes but the last: one inner packet each. The
        // 10 bytes before each one are the tail of the one before, already written out or copied.
        this.#st[this.#base + RX_GROREADS]++;
        for (let off = 0; off < n; off += size) {
          this.#one(slots[i], VNET_HDR_LEN + off, Math.min(size, n - off), src, t);
        }
      }
    }
    this.#co?.flush();
    this.#steal?.run(); // after every batch: a flood of dropped datagrams must not keep flannel0 unread
  }
}

/** The UDP→TUN loop. */
export function runRx(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
  const L = libc();
  const base = init.slot * STAT_SLOT;
  const buf = new Uint8Array(BUF);
  const from = new Uint8Array(16);
  const fromLen = new Uint32Array(1);
  const fromLenB = new Uint8Array(fromLen.buffer);
  const pfd = pollIn(init.sockFd);
  const table = new TableView(ctl);
  const steal = init.steal ? new Stealer(init, ctl, st) : null;
  while (Atomics.load(ctl, CTL_STOP) === 0) {
    const t = table.current();
    fromLen[0] = 16;
    const n = L.recvfrom(init.sockFd, buf, BUF, 0, from, fromLenB);
    if (n < 0) {
      rxWait(steal, pfd);
      continue;
    }
    const src = (from[4] << 24) | (from[5] << 16) | (from[6] << 8) | from[7];
    if (rxAccept(t, src, buf, n, st, base)) {
      if (L.write(init.tunFd, buf, n) < 0) st[base + RX_WRITEERR]++;
      else {
        st[base + RX_PK]++;
        st[base + RX_BY] += n;
      }
    }
    steal?.run(); // after every datagram: a flood of dropped ones must not keep flannel0 unread
  }
}

/** Turns `loop` until `ctl`'s stop flag is set. */
export function turnUntilStopped(loop: RxOffloadLoop, ctl: Int32Array): void {
  while (Atomics.load(ctl, CTL_STOP) === 0) loop.turn();
}
