/**
 * Sending request bytes ({@link MsgWriter}) on the handle's socket through libc's send/recv (no libnl call,
 * no malloc'd receive buffer): one request with its ack, or a pipelined batch.
 *
 * A batch goes out in chunks of up to {@link CHUNK} messages, each chunk ONE datagram (the kernel runs
 * every message of a datagram in order). Only the chunk's last message asks for an ack (NLM_F_ACK); the
 * kernel answers a failed request with an error message anyway, carrying the request's sequence number,
 * so after the last ack every failure of the chunk has been read and is matched to its request. A chunk's
 * answers are read before the next is sent, so the receive buffer never holds more than one chunk's errors.
 * @module
 */
import { errno, libc } from "../sys/ffi.ts";
import { NetlinkError, NLE, syscallError } from "../sys/errors.ts";
import { EINTR, NLM_F_ACK, NLM_F_ACK_TLVS, NLMSG_ERROR } from "./codec/consts.ts";
import { extackOf, kernelError, recvDatagram } from "./io.ts";
import { MsgWriter } from "./codec/msg.ts";
import type { Conn } from "./conn.ts";
import type { NetlinkWrite } from "./types.ts";
import {
  fdbOp,
  neighOp,
  putDeleteFdb,
  putDeleteNeigh,
  putReplaceFdb,
  putReplaceNeigh,
  putRoute,
  routeOp,
} from "./codec/encode.ts";
import type { IndexOf } from "./codec/encode.ts";

/** Messages per datagram of a batch (their error answers fit the 2 MiB receive buffer many times over). */
export const CHUNK = 256;

let nextSeq = 0x40000000;

/** A fresh sequence number (libnl numbers its own requests from the time of day: no overlap). */
export function seq(): number {
  nextSeq = nextSeq >= 0x7fffffff ? 0x40000000 : nextSeq + 1;
  return nextSeq;
}

const scratch = new MsgWriter(512);

/** Sends the bytes `bytes` as one datagram to the kernel; throws on a socket error. */
function sendto(c: Conn, bytes: Uint8Array<ArrayBuffer>, op: () => string): void {
  const fd = c.fd();
  for (;;) {
    if (libc().send(fd, bytes, bytes.length, 0) >= 0) return;
    const e = errno();
    if (e !== EINTR) throw syscallError(op(), e);
  }
}

/**
 * Reads answers until the ack of sequence number `last`; every error answer before it goes to `failed`
 * with its request's sequence number, errno and extended-ack text, every other message to `each` (as an
 * offset into a JS copy of the receive buffer: the replies of a GET request).
 */
function collect(
  c: Conn,
  last: number,
  op: () => string,
  failed: (seq: number, errno: number, msg: string | null) => void,
  each?: (b: Uint8Array, dv: DataView, off: number, len: number, type: number) => void,
): void {
  for (;;) {
    const n = recvDatagram(c, op);
    const b = c.rx;
    const dv = new DataView(b.buffer, 0, n);
    let done = false;
    for (let off = 0; off + 16 <= n;) {
      const len = dv.getUint32(off, true),
        type = dv.getUint16(off + 4, true),
        flags = dv.getUint16(off + 6, true);
      if (len < 16 || off + len > n) break;
      if (type === NLMSG_ERROR && len >= 36) {
        const err = -dv.getInt32(off + 16, true);
        const s = dv.getUint32(off + 28, true); // the echoed request header's nlmsg_seq
        if (err !== 0) failed(s, err, flags & NLM_F_ACK_TLVS ? extackOf(b, off, len, flags) : null);
        if (s === last) done = true;
      } else if (each) each(b, dv, off + 16, len - 16, type);
      off += (len + 3) & ~3;
    }
    if (done) return;
  }
}

/**
 * Sends the one message `put` writes (with NLM_F_ACK and a fresh sequence number), hands any reply
 * messages to `each` (a GET's answer) and waits for the ack; throws the kernel's refusal as a NetlinkError
 * named `op`.
 */
export function queryOne(
  c: Conn,
  op: () => string,
  put: (w: MsgWriter, seq: number, extra: number) => void,
  each?: (b: Uint8Array, dv: DataView, off: number, len: number, type: number) => void,
): void {
  const w = scratch;
  w.reset();
  const s = seq();
  put(w, s, NLM_F_ACK);
  sendto(c, w.slice(), op);
  let error: NetlinkError | null = null;
  collect(c, s, op, (_s, errno, msg) => error ??= kernelError(op(), errno, msg), each);
  if (error) throw error;
}

/** Writes request `wr` into `w` (throws ParseError/NetlinkError for bad input). */
function put(w: MsgWriter, wr: NetlinkWrite, index: IndexOf, s: number, extra: number): void {
  switch (wr.op) {
    case "replaceRoute":
      return putRoute(w, wr.route, false, index, s, extra, () => routeOp("replace", wr.route));
    case "deleteRoute":
      return putRoute(w, wr.route, true, index, s, extra, () => routeOp("del", wr.route));
    case "replaceNeigh":
      return putReplaceNeigh(w, wr.neigh, index, s, extra);
    case "deleteNeigh":
      return putDeleteNeigh(w, wr.neigh, index, s, extra);
    case "replaceFdb":
      return putReplaceFdb(w, wr.fdb, index, s, extra);
    case "deleteFdb":
      return putDeleteFdb(w, wr.fdb, index, s, extra);
  }
}

/** The iproute2-style operation name of a write. */
export function writeOp(wr: NetlinkWrite): string {
  switch (wr.op) {
    case "replaceRoute":
      return routeOp("replace", wr.route);
    case "deleteRoute":
      return routeOp("del", wr.route);
    case "replaceNeigh":
      return neighOp("replace", wr.neigh);
    case "deleteNeigh":
      return neighOp("del", wr.neigh);
    case "replaceFdb":
      return fdbOp("replace", wr.fdb);
    case "deleteFdb":
      return fdbOp("del", wr.fdb);
  }
}

/**
 * `NetlinkHandle.writeMany()`: every write of `writes`, pipelined (see the module doc). Returns one slot
 * per write: null when it succeeded, else its error (ParseError for bad input, NetlinkError for an
 * unknown device or the kernel's refusal, named by the write's operation). One failure never stops or
 * hides the others.
 */
export function writeMany(c: Conn, writes: readonly NetlinkWrite[]): (Error | null)[] {
  const res = writeOnce(c, writes);
  // A device recreated since its ifindex was cached: once more with a fresh name cache (as the
  // one-at-a-time calls retry).
  const again: number[] = [];
  res.forEach((e, i) => {
    if (e instanceof NetlinkError && e.code === -NLE.NODEV) again.push(i);
  });
  if (again.length === 0) return res;
  c.forget();
  const res2 = writeOnce(c, again.map((i) => writes[i]));
  again.forEach((i, k) => res[i] = res2[k]);
  return res;
}

function writeOnce(c: Conn, writes: readonly NetlinkWrite[]): (Error | null)[] {
  const res: (Error | null)[] = new Array(writes.length).fill(null);
  const w = new MsgWriter(CHUNK * 64);
  const index: IndexOf = (ref, op) => c.index(ref, op);
  /** Sequence number → index into `writes`, for the chunk in flight. */
  const bySeq = new Map<number, number>();
  for (let i = 0; i < writes.length;) {
    w.reset();
    bySeq.clear();
    let lastSeq = 0;
    for (; i < writes.length && w.count < CHUNK; i++) {
      const s = seq();
      try {
        put(w, writes[i], index, s, 0);
        bySeq.set(s, i);
        lastSeq = s;
      } catch (e) {
        w.abort();
        res[i] = e instanceof Error ? e : new Error(String(e));
      }
    }
    if (w.count === 0) continue;
    // The chunk's last message asks for the ack that ends it.
    const lastStart = lastMessageStart(w);
    w.dv.setUint16(lastStart + 6, w.dv.getUint16(lastStart + 6, true) | NLM_F_ACK, true);
    const op = () => "batch of netlink requests";
    sendto(c, w.slice(), op);
    collect(c, lastSeq, op, (s, errno, msg) => {
      const k = bySeq.get(s);
      if (k !== undefined) res[k] = kernelError(writeOp(writes[k]), errno, msg);
    });
  }
  return res;
}

/** Byte offset of the last message in `w`. */
function lastMessageStart(w: MsgWriter): number {
  let at = 0;
  for (let off = 0; off < w.len;) {
    at = off;
    off += (w.dv.getUint32(off, true) + 3) & ~3;
  }
  return at;
}
