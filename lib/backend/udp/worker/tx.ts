/**
 * The transmit side of the udp data path (TUN → UDP): each packet read from flannel0 is routed by the peer
 * table and sent unchanged as one datagram (flannel's wire format) — one sendto per packet
 * ({@link PlainTx}), sendmmsg batches ({@link BatchTx}) or, with TUN offloads, TCP super-packets cut into
 * segments and sent with UDP GSO ({@link OffloadTx}) — and the transmit worker's loop ({@link runTxLoop}).
 * @module
 */
import { errno, libc } from "../../../sys/ffi.ts";
import {
  completeCsum,
  GSO_ECN,
  GSO_NONE,
  GSO_TCPV4,
  GSO_TCPV6,
  tsoSplit,
  VNET_F_NEEDS_CSUM,
  VNET_HDR_LEN,
} from "../gso.ts";
import { CTL_STOP, TUN_TX, TX_STATS, type WorkerInit } from "../udp_layout.ts";
import {
  BUF,
  Burst,
  CMSG,
  EAGAIN,
  EINTR,
  EINVAL,
  EIO,
  IDLE_POLL_MS,
  MAX_GSO_SEGS,
  MAX_UDP_PAYLOAD,
  MMSG,
  mmsgVec,
  pollIn,
  setPtr,
  SOL_UDP,
  SPLIT_ROOM,
  type Table,
  TableView,
  TUN_READ,
  TunToken,
  TX_LINGER_MS,
  type TxPath,
  UDP_SEGMENT,
  waitWritable,
} from "./common.ts";

/**
 * The peer address for packet `buf[o..o+n)` (TTL decremented), or null when it is dropped (counted).
 * `o` defaults to 0.
 */
export function txRoute(
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

/** One read→sendto per packet (FLANCTL_UDP_BATCH=1: no batching, no offloads). */
export class PlainTx implements TxPath {
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
export class BatchTx implements TxPath {
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
export function txPath(init: WorkerInit, st: Float64Array, base: number, slots: number): TxPath {
  if (init.vnetHdr) return new OffloadTx(init, st, base);
  return init.batch > 1 ? new BatchTx(init, st, base, slots) : new PlainTx(init, st, base);
}

/**
 * The TUN→UDP loop, whichever {@link TxPath}: a burst of reads (up to `batch`) sent together, then poll()
 * when the TUN device had nothing. With `steal` it reads only while it holds the TUN reader token.
 */
export function runTxLoop(init: WorkerInit, ctl: Int32Array, path: TxPath): void {
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
 * The messages of one sendmmsg over one send buffer, each with its peer address, one iovec into the
 * buffer and, for several datagrams in one message, a UDP_SEGMENT control message (UDP GSO: the kernel
 * cuts the datagrams). Pointers are filled in once (the buffers are off-heap and never move).
 */
export class SendQueue {
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

/**
 * The TUN→UDP path on an IFF_VNET_HDR TUN with TSO offloads: each read is a virtio_net_hdr and a packet,
 * often a TCP GSO super-packet of up to 64 KiB, cut here into MSS-sized IP packets (gso.ts) — each one
 * ordinary flannel UDP payload. The segments of a super-packet leave in one UDP GSO message per ≤ 64 KiB
 * (`udpGso`: a UDP_SEGMENT control message, the kernel cuts the datagrams) or one datagram each; the reads
 * of a burst go out in one sendmmsg. Never waits for more packets than are there.
 */
export class OffloadTx implements TxPath {
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
