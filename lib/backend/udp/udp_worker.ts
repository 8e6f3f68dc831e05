/**
 * A data-path worker of the UDP backend (run as a Web Worker). Role "tx": reads IP packets from the TUN
 * device, looks the destination up in the peer table and sends each packet unchanged (flannel's wire
 * format: the raw IP packet is the UDP payload) to the peer's PublicIP:Port. Role "rx": receives datagrams,
 * drops those from addresses holding no lease, whose inner source is outside the sender's subnets or
 * whose inner destination is not in our subnet, and writes the rest to the TUN device.
 *
 * With `vnetHdr` (flannel0 opened with TUN offloads) every TUN read and write carries a virtio_net_hdr:
 * tx cuts TCP GSO super-packets into MSS-sized packets (gso.ts) and sends them with UDP GSO; rx reads
 * with UDP_GRO (several datagrams per read) and merges the TCP segments of a flow into super-packets
 * (gso.ts Coalescer).
 *
 * With `steal` (the default) the rx worker is also flannel0's reader while traffic is light: flannel0 is
 * in its idle poll with the socket, and after every receive batch it reads what the kernel queued on
 * flannel0 meanwhile (the reply its writes caused: an echo reply, a TCP ACK — in this thread's softirq,
 * usually before write() returns) and sends it itself; a request/response round trip then wakes no tx
 * worker (3 thread wake-ups instead of 4). Finding more than {@link STEAL_MAX} packets waiting it hands
 * flannel0 over to the tx worker, which gives it back after {@link TX_LINGER_MS} without a packet. A
 * token in shared memory ({@link CTL_TUN_READER}) says who reads: only one thread at a time, so packets
 * leave in the order flannel0 handed them over.
 *
 * Every syscall is a blocking FFI call on this worker's own thread: the event loop never sees a packet.
 * Both descriptors are non-blocking; an idle worker waits in poll() with a short timeout so that a stop
 * request (a flag in shared memory) is seen within ~200 ms. The peer table is read from shared memory
 * under a seqlock whenever its sequence number changes.
 * @module
 */
import { errno, libc } from "../../sys/ffi.ts";
import {
  Coalescer,
  completeCsum,
  GSO_ECN,
  GSO_NONE,
  GSO_TCPV4,
  GSO_TCPV6,
  type PacketSink,
  tsoSplit,
  VNET_F_NEEDS_CSUM,
  VNET_HDR_LEN,
} from "./gso.ts";
import {
  CTL_COUNT,
  CTL_ENTRIES,
  CTL_OWN_MASK,
  CTL_OWN_NET,
  CTL_SEQ,
  CTL_STOP,
  CTL_TUN_READER,
  ENTRY_WORDS,
  RX_STATS,
  STAT_SLOT,
  STEAL_SLOT,
  TUN_FREE,
  TUN_RX,
  TUN_TX,
  TX_STATS,
  type WarmupInit,
  type WorkerInit,
  type WorkerStart,
} from "./udp_layout.ts";
import { errText } from "../../base/errors.ts";

const EAGAIN = 11, EINTR = 4;
const PRIO_PROCESS = 0;
const POLLIN = 1, POLLOUT = 4;
const BUF = 65536;
const IDLE_POLL_MS = 200;
/** Most TUN reads the receive worker makes per steal (then the token goes back to the transmit worker). */
const STEAL_MAX = 4;
/**
 * How long the transmit worker keeps the TUN device after its last packet before it gives it back to the
 * receive worker (with `steal`): longer than the gaps of a bulk transfer, shorter than an interactive one's.
 */
const TX_LINGER_MS = 5;

/** Bytes of one `struct mmsghdr` (x86-64/arm64: msghdr 56 + msg_len 4 + padding). */
const MMSG = 64;

/**
 * `n` mmsghdr slots, each with its own 16-byte address and one iovec of `BUF` bytes, pointers filled in
 * once (the buffers are large, off-heap and never move). `headroom` bytes before each iovec's buffer stay
 * free (for the virtio_net_hdr written before a packet on an IFF_VNET_HDR TUN).
 */
function mmsgVec(n: number, headroom = 0) {
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
function pollIn(fd: number): Uint8Array<ArrayBuffer> {
  const pfd = new Uint8Array(8);
  const pv = new DataView(pfd.buffer);
  pv.setInt32(0, fd, true);
  pv.setInt16(4, POLLIN, true);
  return pfd;
}

/** Waits (poll, at most IDLE_POLL_MS) until the socket `fd` takes data again; `pfd` is an 8-byte pollfd. */
function waitWritable(pfd: Uint8Array<ArrayBuffer>, fd: number): void {
  const pv = new DataView(pfd.buffer);
  pv.setInt32(0, fd, true);
  pv.setInt16(4, POLLOUT, true);
  libc().poll(pfd, 1, IDLE_POLL_MS);
}

/**
 * A worker's view of the peer table: re-read (seqlock, {@link readTable}) only when the control thread
 * has bumped CTL_SEQ, else the table already read.
 */
class TableView {
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

/**
 * The peer address for packet `buf[o..o+n)` (TTL decremented), or null when it is dropped (counted).
 * `o` defaults to 0.
 */
function txRoute(
  t: Table,
  buf: Uint8Array,
  n: number,
  st: Float64Array,
  base: number,
  o = 0,
): Uint8Array<ArrayBuffer> | null {
  if (n < 20 || (buf[o] >> 4) !== 4) {
    st[base + 3]++;
    return null;
  }
  const dst = (buf[o + 16] << 24) | (buf[o + 17] << 16) | (buf[o + 18] << 8) | buf[o + 19];
  let sa: Uint8Array<ArrayBuffer> | undefined;
  for (let i = 0; i < t.masks.length && !sa; i++) sa = t.byNet[i].get(dst & t.masks[i]);
  if (!sa) {
    st[base + 2]++;
    return null;
  }
  // One router hop: decrement TTL, patch the header checksum incrementally (RFC 1624).
  if (buf[o + 8] <= 1) {
    st[base + 4]++;
    return null;
  }
  buf[o + 8]--;
  let c = ((buf[o + 10] << 8) | buf[o + 11]) + 0x100;
  if (c > 0xffff) c = (c & 0xffff) + 1;
  buf[o + 10] = c >> 8, buf[o + 11] = c & 0xff;
  return sa;
}

/**
 * True when datagram `buf[o..o+n)` from `src` may be written to the TUN device; else counts the drop.
 */
function rxAccept(
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

/** What one {@link TxPath.burst} ended on. */
const enum Burst {
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
interface TxPath {
  /** Reads up to `max` packets from the TUN device (non-blocking), each routed and queued (or dropped). */
  burst(t: Table | null, max: number): Burst;
  /** Sends everything queued (waiting while the socket is full); returns the messages that were queued. */
  flush(): number;
}

/** One read→sendto per packet (FLANCTL_UDP_BATCH=1: no batching, no offloads). */
class PlainTx implements TxPath {
  readonly #init: WorkerInit;
  readonly #st: Float64Array;
  readonly #base: number;
  readonly #buf = new Uint8Array(BUF);
  readonly #pfd = new Uint8Array(8);
  #sent = 0;
  constructor(init: WorkerInit, st: Float64Array, base: number) {
    this.#init = init, this.#st = st, this.#base = base;
  }
  burst(t: Table | null, max: number): Burst {
    const L = libc(), init = this.#init, st = this.#st, base = this.#base, buf = this.#buf;
    const [PK, BY, , , , SENDERR, READERR] = TX_STATS.map((_, i) => base + i);
    for (let reads = 0; reads < max; reads++) {
      const n = L.read(init.tunFd, buf, BUF);
      if (n < 0) {
        const e = errno();
        if (e === EAGAIN) return Burst.EMPTY;
        if (e === EINTR) continue;
        st[READERR]++;
        return Burst.ERROR;
      }
      const sa = t && txRoute(t, buf, n, st, base);
      if (!sa) continue;
      let r = L.sendto(init.sockFd, buf, n, 0, sa, 16);
      if (r < 0 && errno() === EAGAIN) {
        waitWritable(this.#pfd, init.sockFd);
        r = L.sendto(init.sockFd, buf, n, 0, sa, 16);
      }
      this.#sent++;
      if (r < 0) st[SENDERR]++;
      else {
        st[PK]++;
        st[BY] += n;
      }
    }
    return Burst.FULL;
  }
  flush(): number {
    const n = this.#sent;
    this.#sent = 0;
    return n;
  }
}

/** Reads until EAGAIN or a full batch, sends them in one sendmmsg (a plain TUN, no offloads). */
class BatchTx implements TxPath {
  readonly #init: WorkerInit;
  readonly #st: Float64Array;
  readonly #base: number;
  readonly #m: ReturnType<typeof mmsgVec>;
  readonly #pfd = new Uint8Array(8);
  #k = 0;
  constructor(init: WorkerInit, st: Float64Array, base: number, slots: number) {
    this.#init = init, this.#st = st, this.#base = base;
    this.#m = mmsgVec(slots);
  }
  burst(t: Table | null, max: number): Burst {
    const L = libc(), init = this.#init, st = this.#st, base = this.#base, m = this.#m;
    const end = Math.min(this.#k + max, m.slots.length);
    while (this.#k < end) {
      const k = this.#k;
      const n = L.read(init.tunFd, m.slots[k], BUF);
      if (n < 0) {
        const e = errno();
        if (e === EAGAIN) return Burst.EMPTY;
        if (e === EINTR) continue;
        st[base + 6]++;
        return Burst.ERROR;
      }
      const sa = t && txRoute(t, m.slots[k], n, st, base);
      if (!sa) continue;
      m.names.set(sa, k * 16);
      m.iv.setBigUint64(k * 16 + 8, BigInt(n), true);
      this.#k++;
    }
    return Burst.FULL;
  }
  flush(): number {
    const L = libc(), init = this.#init, st = this.#st, base = this.#base, m = this.#m, k = this.#k;
    let sent = 0;
    while (sent < k) {
      const r = L.sendmmsg(init.sockFd, m.vec.subarray(sent * MMSG), k - sent, 0);
      if (r < 0) {
        if (errno() === EAGAIN) {
          waitWritable(this.#pfd, init.sockFd);
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
    this.#k = 0;
    return k;
  }
}

/**
 * The {@link TxPath} for this data path (offloads, batches, or one syscall per packet), counting in the
 * stat slot at `base`; a batch holds up to `slots` packets.
 */
function txPath(init: WorkerInit, st: Float64Array, base: number, slots: number): TxPath {
  if (init.vnetHdr) return new OffloadTx(init, st, base);
  return init.batch > 1 ? new BatchTx(init, st, base, slots) : new PlainTx(init, st, base);
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
class TunToken {
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

/**
 * The TUN→UDP loop, whichever {@link TxPath}: a burst of reads (up to `batch`) sent together, then poll()
 * when the TUN device had nothing. With `steal` it reads only while it holds the TUN reader token.
 */
function runTxLoop(init: WorkerInit, ctl: Int32Array, path: TxPath): void {
  const L = libc();
  const pfd = pollIn(init.tunFd);
  const table = new TableView(ctl);
  const token = init.steal ? new TunToken(ctl, init.wakeFd) : null;
  while (Atomics.load(ctl, CTL_STOP) === 0) {
    if (token && token.holder !== TUN_TX) {
      token.waitHandoff();
      continue;
    }
    const b = path.burst(table.current(), init.batch);
    const queued = path.flush();
    if (b === Burst.ERROR) L.poll(null, 0, 50); // the device is gone or broken: the control thread repairs it
    else if (b === Burst.EMPTY && queued === 0) {
      // No packet for TX_LINGER_MS: light traffic again, the receive worker watches the TUN device.
      if (L.poll(pfd, 1, token ? TX_LINGER_MS : IDLE_POLL_MS) === 0) token?.releaseTx();
    }
  }
}

/**
 * The receive worker's part with `steal`: it reads the TUN device while the transmit worker does not
 * ({@link TunToken}) — after every receive batch (the kernel, in this thread's softirq, usually has
 * queued the reply to what it wrote — an echo reply, a TCP ACK — on the TUN before write() returns) and
 * while idle (the TUN device is in its poll set). At most {@link STEAL_MAX} reads each time; finding more waiting it hands the
 * TUN device over to the transmit worker.
 */
class Stealer {
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
function rxWait(steal: Stealer | null, pfd: Uint8Array<ArrayBuffer>): void {
  const e = errno();
  if (e === EAGAIN) {
    if (steal) steal.idle();
    else libc().poll(pfd, 1, IDLE_POLL_MS);
  } else if (e !== EINTR) libc().poll(null, 0, 50);
}

/** Indexes in a receive stat slot (RX_STATS), for the three receive loops. */
const [RX_PK, RX_BY, , , , , RX_WRITEERR, RX_BATCHES, RX_COALESCED, RX_CSEGS, RX_GROREADS] = RX_STATS.map((
  _,
  i,
) => i);

/** The UDP→TUN loop with recvmmsg: up to `batch` datagrams per call, each written to the TUN device. */
function runRxBatch(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
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

/** Bytes of one UDP_SEGMENT control message (CMSG_SPACE(2)): cmsghdr 16 + u16 + padding. */
const CMSG = 24;
const SOL_UDP = 17, UDP_SEGMENT = 103, UDP_GRO = 104;
const EIO = 5, EINVAL = 22;
/** Most UDP payload bytes in one (GSO) send: IPv4 total length 65535 − IP 20 − UDP 8. */
const MAX_UDP_PAYLOAD = 65507;
/** Most segments in one UDP GSO send (the kernel's UDP_MAX_SEGMENTS is 64 on older kernels). */
const MAX_GSO_SEGS = 64;
/** Largest read from an IFF_VNET_HDR TUN: the header and a 64 KiB packet. */
const TUN_READ = VNET_HDR_LEN + 65535;
/** Room kept free in the send buffer before each read: one super-packet cut into small segments. */
const SPLIT_ROOM = 65535 + 256 * 120;

/**
 * The messages of one sendmmsg over one send buffer, each with its peer address, one iovec into the
 * buffer and, for several datagrams in one message, a UDP_SEGMENT control message (UDP GSO: the kernel
 * cuts the datagrams). Pointers are filled in once (the buffers are off-heap and never move).
 */
class SendQueue {
  static readonly MAXMSG = 1024;
  static readonly OUT = 2 << 20;
  /** The send buffer; messages are slices of it. */
  readonly out = new Uint8Array(SendQueue.OUT);
  /** Messages queued. */
  k = 0;
  /** Bytes of `out` used. */
  pos = 0;
  /** UDP GSO in use (turned off for good when the kernel refuses a GSO send). */
  gso: boolean;
  readonly #vec = new Uint8Array(SendQueue.MAXMSG * MMSG);
  readonly #names = new Uint8Array(SendQueue.MAXMSG * 16);
  readonly #iovs = new Uint8Array(SendQueue.MAXMSG * 16);
  readonly #ctrl = new Uint8Array(SendQueue.MAXMSG * CMSG);
  readonly #v = new DataView(this.#vec.buffer);
  readonly #iv = new DataView(this.#iovs.buffer);
  readonly #cv = new DataView(this.#ctrl.buffer);
  readonly #segs = new Uint32Array(SendQueue.MAXMSG); // datagrams per message
  readonly #outAddr: number;
  readonly #pfd = new Uint8Array(8);

  constructor(gso: boolean) {
    this.gso = gso;
    const ptr = (b: Uint8Array) => Number(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b)));
    this.#outAddr = ptr(this.out);
    const v = this.#v, cv = this.#cv;
    for (let i = 0; i < SendQueue.MAXMSG; i++) {
      setPtr(v, i * MMSG, ptr(this.#names) + i * 16);
      v.setUint32(i * MMSG + 8, 16, true);
      setPtr(v, i * MMSG + 16, ptr(this.#iovs) + i * 16);
      v.setBigUint64(i * MMSG + 24, 1n, true);
      setPtr(v, i * MMSG + 32, ptr(this.#ctrl) + i * CMSG);
      cv.setBigUint64(i * CMSG, 18n, true); // CMSG_LEN(2)
      cv.setInt32(i * CMSG + 8, SOL_UDP, true);
      cv.setInt32(i * CMSG + 12, UDP_SEGMENT, true);
    }
  }

  /** True while another TUN read fits (a super-packet cut into small segments included). */
  room(): boolean {
    return this.k + 256 <= SendQueue.MAXMSG && this.pos + SPLIT_ROOM <= SendQueue.OUT;
  }

  /** Queues `len` bytes of `out` at `pos` to `sa` (pos advances), cut in `seg`-byte datagrams if seg > 0. */
  add(sa: Uint8Array, len: number, seg: number, count: number): void {
    const k = this.k++;
    this.#names.set(sa, k * 16);
    setPtr(this.#iv, k * 16, this.#outAddr + this.pos);
    this.#iv.setUint32(k * 16 + 8, len, true);
    this.#v.setUint32(k * MMSG + 40, seg ? CMSG : 0, true);
    if (seg) this.#cv.setUint16(k * CMSG + 16, seg, true);
    this.#segs[k] = count;
    this.pos += len;
  }

  /** Sends every queued message (waiting while the socket is full), counts them, empties the queue. */
  send(fd: number, st: Float64Array, base: number): void {
    const L = libc();
    const [PK, BY, , , , SENDERR, , BATCHES, , GSOSENDS] = TX_STATS.map((_, i) => base + i);
    const k = this.k;
    let sent = 0;
    while (sent < k) {
      const r = L.sendmmsg(fd, this.#vec.subarray(sent * MMSG), k - sent, 0);
      if (r < 0) {
        const e = errno();
        if (e === EAGAIN) {
          waitWritable(this.#pfd, fd);
          continue;
        }
        // This message failed: count it, go on with the next. A kernel or route refusing UDP GSO
        // (EIO: no checksum offload on the way; EINVAL) turns it off for good (segments go one by one).
        if (this.gso && this.#segs[sent] > 1 && (e === EIO || e === EINVAL)) this.gso = false;
        st[SENDERR] += this.#segs[sent];
        sent++;
        continue;
      }
      for (let i = sent; i < sent + r; i++) {
        st[PK] += this.#segs[i];
        st[BY] += this.#iv.getUint32(i * 16 + 8, true);
        if (this.#segs[i] > 1) st[GSOSENDS]++;
      }
      sent += r;
    }
    if (k) st[BATCHES]++;
    this.k = this.pos = 0;
  }
}

/** Writes pointer value `a` (a number below 2^53) at `o` of `dv`, little-endian 64 bits. */
function setPtr(dv: DataView, o: number, a: number): void {
  dv.setUint32(o, a % 4294967296, true);
  dv.setUint32(o + 4, Math.floor(a / 4294967296), true);
}

/**
 * The TUN→UDP path on an IFF_VNET_HDR TUN with TSO offloads: each read is a virtio_net_hdr and a packet,
 * often a TCP GSO super-packet of up to 64 KiB, cut here into MSS-sized IP packets (gso.ts) — each one
 * ordinary flannel UDP payload. The segments of a super-packet leave in one UDP GSO message per ≤ 64 KiB
 * (`udpGso`: a UDP_SEGMENT control message, the kernel cuts the datagrams) or one datagram each; the reads
 * of a burst go out in one sendmmsg. Never waits for more packets than are there.
 */
class OffloadTx implements TxPath {
  readonly #init: WorkerInit;
  readonly #st: Float64Array;
  readonly #base: number;
  readonly #inb = new Uint8Array(TUN_READ);
  readonly #q: SendQueue;
  readonly #lens = new Uint32Array(256);
  constructor(init: WorkerInit, st: Float64Array, base: number) {
    this.#init = init, this.#st = st, this.#base = base;
    this.#q = new SendQueue(init.udpGso);
  }
  burst(t: Table | null, max: number): Burst {
    const L = libc(), init = this.#init, st = this.#st, base = this.#base, inb = this.#inb, q = this.#q;
    const lens = this.#lens;
    const [, , , MALFORMED, , , READERR, , SUPER] = TX_STATS.map((_, i) => base + i);
    for (let reads = 0; reads < max && q.room(); reads++) {
      const n = L.read(init.tunFd, inb, TUN_READ);
      if (n < 0) {
        const e = errno();
        if (e === EAGAIN) return Burst.EMPTY;
        if (e === EINTR) continue;
        st[READERR]++;
        return Burst.ERROR;
      }
      const plen = n - VNET_HDR_LEN;
      const sa = t && txRoute(t, inb, plen, st, base, VNET_HDR_LEN);
      if (!sa) continue;
      const gsoType = inb[1] & ~GSO_ECN;
      if (gsoType === GSO_TCPV4 || gsoType === GSO_TCPV6) {
        const cnt = tsoSplit(inb, VNET_HDR_LEN, plen, inb[4] | (inb[5] << 8), q.out, q.pos, lens);
        if (cnt < 0) {
          st[MALFORMED]++;
          continue;
        }
        st[SUPER]++;
        const segLen = lens[0];
        const per = q.gso ? Math.max(1, Math.min(MAX_GSO_SEGS, Math.floor(MAX_UDP_PAYLOAD / segLen))) : 1;
        for (let i = 0; i < cnt; i += per) {
          const c = Math.min(per, cnt - i);
          let len = 0;
          for (let j = i; j < i + c; j++) len += lens[j];
          q.add(sa, len, c > 1 ? segLen : 0, c);
        }
      } else if (gsoType !== GSO_NONE) {
        st[MALFORMED]++; // UDP fragmentation offload is never asked for
      } else if (
        (inb[0] & VNET_F_NEEDS_CSUM) &&
        !completeCsum(inb, VNET_HDR_LEN, plen, inb[6] | (inb[7] << 8), inb[8] | (inb[9] << 8))
      ) {
        st[MALFORMED]++;
      } else {
        q.out.set(inb.subarray(VNET_HDR_LEN, n), q.pos);
        q.add(sa, plen, 0, 1);
      }
    }
    return Burst.FULL;
  }
  flush(): number {
    const queued = this.#q.k;
    this.#q.send(this.#init.sockFd, this.#st, this.#base);
    return queued;
  }
}

/**
 * The UDP→TUN loop on an IFF_VNET_HDR TUN: recvmmsg into slots with room for the virtio_net_hdr; with
 * `coalesce` the accepted datagrams of one batch go through gso.ts's Coalescer (runs of one TCP flow
 * written as one GSO super-packet), else each is written with a zero header. Flushed at every batch end.
 */
function runRxOffload(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
  turnUntilStopped(new RxOffloadLoop(init, ctl, st), ctl);
}

/**
 * The state and one turn of {@link runRxOffload}'s loop. A class, not closures in the loop function: V8
 * compiles {@link turn} (and the methods it calls) as functions shared by every instance, so what the
 * warm-up's instance made hot is the code the serving instance runs from its first packet (a closure made
 * per call, or a loop compiled on-stack in one call, would start cold again).
 */
class RxOffloadLoop implements PacketSink {
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
function runRx(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
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

/** The worker's global scope (typed here: the project is checked with the window lib). */
const scope = globalThis as unknown as {
  onmessage: ((ev: MessageEvent<WorkerStart>) => void) | null;
  postMessage(m: unknown): void;
  close(): void;
};

/** The loop of this worker's role (returns when `ctl`'s stop flag is set). */
function runRole(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
  if (init.role === "tx") {
    runTxLoop(init, ctl, txPath(init, st, init.slot * STAT_SLOT, init.batch));
  } else if (init.vnetHdr) runRxOffload(init, ctl, st);
  else (init.batch > 1 ? runRxBatch : runRx)(init, ctl, st);
}

/** Turns `loop` until `ctl`'s stop flag is set. */
function turnUntilStopped(loop: RxOffloadLoop, ctl: Int32Array): void {
  while (Atomics.load(ctl, CTL_STOP) === 0) loop.turn();
}

/**
 * The receive worker (offload loop) with a warm-up first (udp_warmup.ts): the serving loop is made, then
 * the warm-up's own one on the stand-in descriptors, control block and counters, turned until the control
 * thread stops it, then the serving one. Both are made before either turns, and `init` itself is pointed
 * at the stand-ins meanwhile (not a copy): every object the serving loop touches then has the shape — and
 * every field the state — it had while V8 compiled the warm-up's turns, so that code stays valid for it
 * (made after the warm-up, its fields' second values would have invalidated it).
 */
function runRxWarmedUp(init: WorkerInit, ctl: Int32Array, st: Float64Array, w: WarmupInit): void {
  const serving = new RxOffloadLoop(init, ctl, st);
  const { tunFd, sockFd, wakeFd } = init;
  const wctl = new Int32Array(w.ctl);
  init.tunFd = w.tunFd, init.sockFd = w.sockFd, init.wakeFd = -1;
  try {
    turnUntilStopped(new RxOffloadLoop(init, wctl, new Float64Array(w.stats)), wctl);
  } finally {
    init.tunFd = tunFd, init.sockFd = sockFd, init.wakeFd = wakeFd;
  }
  scope.postMessage({ warmed: true });
  turnUntilStopped(serving, ctl);
}

scope.onmessage = (ev: MessageEvent<WorkerStart>) => {
  const { init, warmup } = ev.data;
  const ctl = new Int32Array(init.ctl);
  const st = new Float64Array(init.stats);
  const L = libc(); // load before saying ready: a missing libc fails here, visibly
  // A higher priority for this thread only: a woken worker runs before ordinary tasks on a busy node.
  // Without CAP_SYS_NICE it stays as it is (the data path works the same, only waits longer for a CPU).
  const niced = init.nice === 0 || L.setpriority(PRIO_PROCESS, L.gettid(), init.nice) === 0;
  let pinned = true;
  if (init.cpu >= 0) {
    const set = new Uint8Array(128); // cpu_set_t: 1024 CPUs
    set[init.cpu >> 3] = 1 << (init.cpu & 7);
    pinned = init.cpu < 1024 && L.sched_setaffinity(0, 128n, set) === 0;
  }
  scope.postMessage({ ready: true, niced, pinned });
  try {
    if (warmup && init.role === "rx" && init.vnetHdr) runRxWarmedUp(init, ctl, st, warmup);
    else runRole(init, ctl, st);
    scope.postMessage({ stopped: true });
  } catch (e) {
    scope.postMessage({ error: errText(e) });
  }
  scope.close();
};
