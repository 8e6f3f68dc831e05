/**
 * What the udp data path's workers share (lib/backend/udp/udp_worker.ts runs them): the syscall constants,
 * the mmsghdr vectors, the peer table read from shared memory under its seqlock ({@link TableView}), the
 * token that says which worker reads flannel0 ({@link TunToken}) and the {@link TxPath} interface both
 * workers send through.
 * @module
 */
import { libc } from "../../../sys/ffi.ts";
import { VNET_HDR_LEN } from "../gso.ts";
import {
  CTL_COUNT,
  CTL_ENTRIES,
  CTL_OWN_MASK,
  CTL_OWN_NET,
  CTL_SEQ,
  CTL_TUN_READER,
  ENTRY_WORDS,
  TUN_FREE,
  TUN_RX,
  TUN_TX,
} from "../udp_layout.ts";

/** The OS numbers the workers compare and pass (lib/sys/consts.ts). */
export { EAGAIN, EINTR, EINVAL, EIO, SOL_UDP, UDP_GRO, UDP_SEGMENT } from "../../../sys/consts.ts";

export const POLLIN = 1, POLLOUT = 4;

export const BUF = 65536;

export const IDLE_POLL_MS = 200;

/** Most TUN reads the receive worker makes per steal (then the token goes back to the transmit worker). */
export const STEAL_MAX = 4;

/**
 * How long the transmit worker keeps the TUN device after its last packet before it gives it back to the
 * receive worker (with `steal`): longer than the gaps of a bulk transfer, shorter than an interactive one's.
 */
export const TX_LINGER_MS = 5;

/** Bytes of one `struct mmsghdr` (x86-64/arm64: msghdr 56 + msg_len 4 + padding). */
export const MMSG = 64;

/**
 * `n` mmsghdr slots, each with its own 16-byte address and one iovec of `BUF` bytes, pointers filled in
 * once (the buffers are large, off-heap and never move). `headroom` bytes before each iovec's buffer stay
 * free (for the virtio_net_hdr written before a packet on an IFF_VNET_HDR TUN).
 */
export function mmsgVec(n: number, headroom = 0) {
  const stride = BUF + headroom;
  const vec = new Uint8Array(n * MMSG);
  const names = new Uint8Array(n * 16);
  const iovs = new Uint8Array(n * 16);
  const data = new Uint8Array(n * stride);
  const v = new DataView(vec.buffer), iv = new DataView(iovs.buffer);
  const addr = (b: Uint8Array, off: number) =>
    BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b))) + BigInt(off);
  for (let i = 0; i < n; i++) {
    iv.setBigUint64(i * 16, addr(data, i * stride + headroom), true);
    iv.setBigUint64(i * 16 + 8, BigInt(BUF), true);
    v.setBigUint64(i * MMSG, addr(names, i * 16), true);
    v.setUint32(i * MMSG + 8, 16, true);
    v.setBigUint64(i * MMSG + 16, addr(iovs, i * 16), true);
    v.setBigUint64(i * MMSG + 24, 1n, true);
  }
  const slots = Array.from({ length: n }, (_, i) => data.subarray(i * stride, (i + 1) * stride));
  return { vec, v, names, iovs, iv, data, slots };
}

/**
 * A worker's peer table. Every address, network and mask in it is an int32 (the control block's words as
 * they are, and packet addresses as `<<`/`|` make them), never a uint32: one number kind for every
 * address, so the compiled lookups stay valid whichever half of the address space a peer is in (127.0.0.1
 * in the warm-up, 192.168.x.y on the underlay: as uint32, the second would throw that code away).
 */
export interface Table {
  /** Distinct masks, longest first. */
  masks: number[];
  /** Per mask: subnet network → sockaddr_in of the peer. */
  byNet: Map<number, Uint8Array<ArrayBuffer>>[];
  /** Peer public IP → its subnets as [net, mask, net, mask, …]. */
  bySrc: Map<number, number[]>;
  ownNet: number;
  ownMask: number;
}

export function readTable(ctl: Int32Array, prev: Table | null): Table | null {
  const s1 = Atomics.load(ctl, CTL_SEQ);
  if (s1 & 1) return prev;
  const n = Atomics.load(ctl, CTL_COUNT);
  const masks: number[] = [];
  const byNet: Map<number, Uint8Array<ArrayBuffer>>[] = [];
  const bySrc = new Map<number, number[]>();
  for (let i = 0; i < n; i++) {
    const o = CTL_ENTRIES + i * ENTRY_WORDS;
    const net = ctl[o], mask = ctl[o + 1], ip = ctl[o + 2], port = ctl[o + 3];
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
    ownNet: ctl[CTL_OWN_NET],
    ownMask: ctl[CTL_OWN_MASK],
  };
  // Longest mask first, so the most specific subnet wins (as a route lookup would).
  const order = masks.map((m, i) => [m, i] as const).sort((a, b) => (b[0] >>> 0) - (a[0] >>> 0));
  t.masks = order.map((x) => x[0]);
  t.byNet = order.map((x) => byNet[x[1]]);
  return Atomics.load(ctl, CTL_SEQ) === s1 ? t : prev;
}

/** A one-entry `struct pollfd` waiting for POLLIN on `fd` (for `poll(pfd, 1, ms)`). */
export function pollIn(fd: number): Uint8Array<ArrayBuffer> {
  const pfd = new Uint8Array(8);
  const pv = new DataView(pfd.buffer);
  pv.setInt32(0, fd, true);
  pv.setInt16(4, POLLIN, true);
  return pfd;
}

/** Waits (poll, at most IDLE_POLL_MS) until the socket `fd` takes data again; `pfd` is an 8-byte pollfd. */
export function waitWritable(pfd: Uint8Array<ArrayBuffer>, fd: number): void {
  const pv = new DataView(pfd.buffer);
  pv.setInt32(0, fd, true);
  pv.setInt16(4, POLLOUT, true);
  libc().poll(pfd, 1, IDLE_POLL_MS);
}

/**
 * A worker's view of the peer table: re-read (seqlock, {@link readTable}) only when the control thread
 * has bumped CTL_SEQ, else the table already read.
 */
export class TableView {
  readonly #ctl: Int32Array;
  #seq = -1;
  #t: Table | null = null;
  constructor(ctl: Int32Array) {
    this.#ctl = ctl;
  }
  /** The current table (null before the first one is published). */
  current(): Table | null {
    const s = Atomics.load(this.#ctl, CTL_SEQ);
    if (s !== this.#seq) {
      const nt = readTable(this.#ctl, this.#t);
      if (nt !== this.#t) (this.#t = nt), (this.#seq = s);
    }
    return this.#t;
  }
}

/** What one {@link TxPath.burst} ended on. */
export const enum Burst {
  /** `max` reads done (more may be waiting). */
  FULL,
  /** The TUN device had no more packets (EAGAIN). */
  EMPTY,
  /** A read failed (not EAGAIN/EINTR): the caller backs off. */
  ERROR,
}

/**
 * One way of taking packets from the TUN device and sending them to the peers: {@link burst} reads (never
 * waits) and queues, {@link flush} sends what was queued. The transmit worker runs one; with `steal` the
 * receive worker runs its own one on the same descriptors, with its own buffers and stat slot.
 */
export interface TxPath {
  /** Reads up to `max` packets from the TUN device (non-blocking), each routed and queued (or dropped). */
  burst(t: Table | null, max: number): Burst;
  /** Sends everything queued (waiting while the socket is full); returns the messages that were queued. */
  flush(): number;
}

/**
 * The TUN reader token ({@link CTL_TUN_READER}) with `steal`. {@link TUN_FREE}: the receive worker watches
 * the TUN device in its poll (with its socket) and sends what comes — light traffic needs no transmit
 * worker wake-up at all, and the replies its own writes made the kernel queue are taken right after the
 * write. {@link TUN_RX}: the receive worker is reading. {@link TUN_TX}: the transmit worker owns the TUN
 * device (the receive worker found more than {@link STEAL_MAX} packets waiting and handed it over); it
 * gives it back after {@link TX_LINGER_MS} without a packet. Only the holder reads, so packets leave in
 * the order the TUN device handed them over.
 */
export class TunToken {
  readonly #ctl: Int32Array;
  readonly #wakeFd: number;
  readonly #one = new BigUint64Array([1n]);
  constructor(ctl: Int32Array, wakeFd: number) {
    this.#ctl = ctl, this.#wakeFd = wakeFd;
  }
  /** Who holds the token now. */
  get holder(): number {
    return Atomics.load(this.#ctl, CTL_TUN_READER);
  }
  /** The transmit worker: sleeps until the token is handed over (or IDLE_POLL_MS passed). */
  waitHandoff(): void {
    const v = Atomics.load(this.#ctl, CTL_TUN_READER);
    if (v !== TUN_TX) Atomics.wait(this.#ctl, CTL_TUN_READER, v, IDLE_POLL_MS);
  }
  /** The transmit worker gives the TUN device back to the receive worker (and wakes its poll). */
  releaseTx(): void {
    Atomics.store(this.#ctl, CTL_TUN_READER, TUN_FREE);
    libc().write(this.#wakeFd, new Uint8Array(this.#one.buffer), 8);
  }
  /** The receive worker's take: never waits (false while the transmit worker holds the token). */
  tryTakeRx(): boolean {
    return Atomics.compareExchange(this.#ctl, CTL_TUN_READER, TUN_FREE, TUN_RX) === TUN_FREE;
  }
  /** The receive worker is done: the token is free again, or (`handOver`) the transmit worker's. */
  releaseRx(handOver: boolean): void {
    if (!handOver) Atomics.store(this.#ctl, CTL_TUN_READER, TUN_FREE);
    else {
      Atomics.store(this.#ctl, CTL_TUN_READER, TUN_TX);
      Atomics.notify(this.#ctl, CTL_TUN_READER);
    }
  }
}

/** Bytes of one UDP_SEGMENT control message (CMSG_SPACE(2)): cmsghdr 16 + u16 + padding. */
export const CMSG = 24;

/** Most UDP payload bytes in one (GSO) send: IPv4 total length 65535 − IP 20 − UDP 8. */
export const MAX_UDP_PAYLOAD = 65507;

/** Most segments in one UDP GSO send (the kernel's UDP_MAX_SEGMENTS is 64 on older kernels). */
export const MAX_GSO_SEGS = 64;

/** Largest read from an IFF_VNET_HDR TUN: the header and a 64 KiB packet. */
export const TUN_READ = VNET_HDR_LEN + 65535;

/** Room kept free in the send buffer before each read: one super-packet cut into small segments. */
export const SPLIT_ROOM = 65535 + 256 * 120;

/** Writes pointer value `a` (a number below 2^53) at `o` of `dv`, little-endian 64 bits. */
export function setPtr(dv: DataView, o: number, a: number): void {
  dv.setUint32(o, a % 4294967296, true);
  dv.setUint32(o + 4, Math.floor(a / 4294967296), true);
}
