/**
 * Message plumbing of the libnl handle: cache dumps, raw dumps, compact scans, requests and their acks
 * (with the kernel's extended-ack error text).
 * @module
 */
import { errno, libc, nl } from "../sys/ffi.ts";
import { errnoText, errnoToNle, NetlinkError, NLE, syscallError } from "../sys/errors.ts";
import {
  EINTR,
  EINVAL,
  EOPNOTSUPP,
  MSG_PEEK,
  MSG_TRUNC,
  NETLINK_GET_STRICT_CHK,
  NLM_F_ACK_TLVS,
  NLM_F_CAPPED,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  NLMSG_ALIGNTO,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLMSGERR_ATTR_MSG,
  ONE,
  RTM_NEWLINK,
  RTM_SETLINK,
  SOL_NETLINK,
  ZERO,
} from "./codec/consts.ts";
import { attrStr, AttrWalk } from "./codec/attrs.ts";
import { geterror } from "./conn.ts";
import type { Conn, Ptr } from "./conn.ts";

/** Allocates a cache with `fill`, iterates it with `each`, always frees it. */
export function dump(
  c: Conn,
  op: string,
  fill: (out: BigUint64Array<ArrayBuffer>) => number,
  each: (obj: NonNullable<Ptr>) => void,
) {
  c.live();
  const out = c.out.reset();
  const err = fill(out.buf);
  c.check(err, () => op);
  const cache = out.value;
  if (cache === null) return;
  try {
    for (let o = nl().nl_cache_get_first(cache); o !== null; o = nl().nl_cache_get_next(o)) each(o);
  } finally {
    nl().nl_cache_free(cache);
  }
}

/** A NetlinkError for a kernel errno (with its extended-ack text). */
export function kernelError(op: string, errno: number, message: string | null): NetlinkError {
  const code = errnoToNle(errno);
  return new NetlinkError(op, code, () => geterror(code), errnoText(errno), { errno, message });
}

/**
 * Reads answers until the ack of the request just sent. Returns 0, or the kernel's errno (positive)
 * and its extended-ack message. Messages before the ack are handed to `each` (RTM_GETNSID answers).
 */
export function readAck(
  c: Conn,
  op: () => string,
  each?: (p: NonNullable<Ptr>, type: number, len: number) => void,
): [number, string | null] {
  const sk = c.live();
  const addr = new Uint8Array(12);
  const out = c.out;
  const head = new Uint8Array(20);
  const hv = new DataView(head.buffer);
  for (;;) {
    out.reset();
    const n = nl().nl_recv(sk, addr, out.buf, null);
    if (n < 0) c.check(n, op);
    const buf = out.value;
    if (buf === null) continue;
    try {
      for (let off = 0; off + 16 <= n;) {
        const p = Deno.UnsafePointer.offset(buf, off)!;
        Deno.UnsafePointerView.copyInto(p, head.subarray(0, Math.min(20, n - off)));
        const len = hv.getUint32(0, true), type = hv.getUint16(4, true), flags = hv.getUint16(6, true);
        if (len < 16 || off + len > n) break;
        if (type === NLMSG_ERROR) {
          const err = -hv.getInt32(16, true);
          let msg: string | null = null;
          if (err !== 0 && flags & NLM_F_ACK_TLVS) msg = extack(p, len, flags);
          return [err, msg];
        }
        each?.(p, type, len);
        off += (len + 3) & ~3;
      }
    } finally {
      libc().free(buf);
    }
  }
}

/** NLMSGERR_ATTR_MSG of an NLMSG_ERROR message at `p` (length `len`), or null. */
export function extack(p: NonNullable<Ptr>, len: number, flags: number): string | null {
  const bytes = new Uint8Array(len);
  Deno.UnsafePointerView.copyInto(p, bytes);
  return extackOf(bytes, 0, len, flags);
}

/** NLMSGERR_ATTR_MSG of the NLMSG_ERROR message at `b[off]` (length `len`), or null. */
export function extackOf(b: Uint8Array, off: number, len: number, flags: number): string | null {
  const m = b.subarray(off, off + len);
  const dv = new DataView(m.buffer, m.byteOffset, m.length);
  const echoed = flags & NLM_F_CAPPED ? 16 : dv.getUint32(20, true);
  for (const at = new AttrWalk(dv, 20 + ((echoed + 3) & ~3), m.length); at.next();) {
    if (at.type === NLMSGERR_ATTR_MSG) return attrStr(m, at.v, at.vlen) || null;
  }
  return null;
}

/**
 * Builds a request with `build` (an rtnl_*_build_*_request call storing an nl_msg), sends it, waits for
 * the kernel's ack and frees the message. With `setlinkFallback`, an RTM_NEWLINK the kernel refuses with
 * EOPNOTSUPP is re-sent as RTM_SETLINK (what rtnl_link_change does).
 */
export function transact(
  c: Conn,
  op: () => string,
  build: (out: BigUint64Array<ArrayBuffer>) => number,
  setlinkFallback = false,
) {
  const sk = c.live();
  const out = c.out.reset();
  c.check(build(out.buf), op);
  const msg = out.value;
  if (msg === null) throw new NetlinkError(op(), -NLE.NOMEM, geterror(-NLE.NOMEM));
  try {
    for (;;) {
      c.check(nl().nl_send_auto(sk, msg), op);
      const [err, text] = readAck(c, op);
      if (err === 0) return;
      if (setlinkFallback && err === EOPNOTSUPP) {
        const hv = new Deno.UnsafePointerView(nl().nlmsg_hdr(msg)!);
        if (hv.getUint16(4) === RTM_NEWLINK) {
          const fix = new Uint8Array(new Uint16Array([RTM_SETLINK]).buffer);
          patch(nl().nlmsg_hdr(msg)!, 4, fix);
          patch(nl().nlmsg_hdr(msg)!, 8, new Uint8Array(4)); // NL_AUTO_SEQ: a fresh sequence number
          continue;
        }
      }
      throw kernelError(op(), err, text);
    }
  } finally {
    nl().nlmsg_free(msg);
  }
}

/**
 * Dumps `type` (RTM_GETROUTE/RTM_GETNEIGH) with header `hdr` and hands every answer message to `each`
 * as a pointer to its nlmsghdr. Used instead of libnl caches where the cache would merge distinct
 * kernel objects (IPv6 routes differing only in next hop, FDB entries per remote).
 */
export function rawDump(
  c: Conn,
  op: string,
  type: number,
  hdr: Uint8Array<ArrayBuffer>,
  each: (nlh: NonNullable<Ptr>, type: number) => void,
) {
  const sk = c.live();
  // No NLM_F_ACK on a dump: the kernel would queue an ack after NLMSG_DONE for the next reader.
  nl().nl_socket_disable_auto_ack(sk);
  const sent = nl().nl_send_simple(sk, type, NLM_F_DUMP, hdr, BigInt(hdr.length));
  nl().nl_socket_enable_auto_ack(sk);
  c.check(sent, () => op);
  const addr = new Uint8Array(12);
  const out = c.out;
  const head = new Uint8Array(16);
  const hv = new DataView(head.buffer);
  for (;;) {
    out.reset();
    const n = nl().nl_recv(sk, addr, out.buf, null);
    if (n < 0) c.check(n, () => op);
    const buf = out.value;
    if (buf === null) continue;
    let done = false;
    try {
      for (let off = 0; off + 16 <= n;) {
        const p = Deno.UnsafePointer.offset(buf, off)!;
        Deno.UnsafePointerView.copyInto(p, head);
        const len = hv.getUint32(0, true);
        const t = hv.getUint16(4, true);
        if (len < 16 || off + len > n) break;
        if (t === NLMSG_DONE) {
          done = true;
          break;
        }
        if (t === NLMSG_ERROR) {
          const e = new Int32Array(1);
          Deno.UnsafePointerView.copyInto(Deno.UnsafePointer.offset(p, 16)!, new Uint8Array(e.buffer));
          if (e[0] < 0) {
            throw kernelError(op, -e[0], null);
          }
          done = true;
          break;
        }
        each(p, t);
        off += (len + 3) & ~3;
      }
    } finally {
      libc().free(buf);
    }
    if (done) return;
  }
}

// ---------------------------------------------------------------- compact scans

/**
 * Sends dump request `type` (header + attributes in `req`) and hands every answer message to `each` as
 * an offset into a JS copy of the receive buffer (one copy per recv(), parsed with a DataView: no libnl
 * object and no FFI call per message). With `strict`, NETLINK_GET_STRICT_CHK is on while the request is
 * processed (rtnetlink handles it during send), so the kernel applies the filters in `req`; kernels
 * without it (< 4.20), or that refuse the strict header, get the plain dump and callers filter here.
 */
export function scan(
  c: Conn,
  op: string,
  type: number,
  req: Uint8Array<ArrayBuffer>,
  each: (b: Uint8Array, dv: DataView, off: number, len: number) => void,
  tryStrict = true,
): void {
  const sk = c.live();
  const fd = nl().nl_socket_get_fd(sk);
  const strict = tryStrict && libc().setsockopt(fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, ONE, 4) === 0;
  let sent: number;
  try {
    nl().nl_socket_disable_auto_ack(sk);
    sent = nl().nl_send_simple(sk, type, NLM_F_DUMP, req, BigInt(req.length));
    nl().nl_socket_enable_auto_ack(sk);
  } finally {
    if (strict) libc().setsockopt(fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, ZERO, 4);
  }
  c.check(sent, () => op);
  for (;;) {
    const n = recvDatagram(c, () => op);
    const b = c.rx;
    const dv = new DataView(b.buffer, 0, n);
    for (let off = 0; off + 16 <= n;) {
      const len = dv.getUint32(off, true), t = dv.getUint16(off + 4, true);
      if (len < 16 || off + len > n) break;
      if (t === NLMSG_DONE) return;
      if (t === NLMSG_ERROR) {
        const e = -dv.getInt32(off + 16, true);
        if (e === 0) return;
        if (strict && e === EINVAL) {
          // A strict header this kernel refuses: the plain dump (family only), filtered by the callers.
          const plain = new Uint8Array(12);
          plain[0] = req[0];
          scan(c, op, type, plain, each, false);
          return;
        }
        throw kernelError(op, e, null);
      }
      if (t === type - 2) each(b, dv, off + 16, len - 16); // RTM_GETx → RTM_NEWx answers
      off += (len + 3) & ~3;
    }
  }
}

/**
 * Reads the next datagram on `c`'s socket into `c.rx` (grown to fit: it is peeked at first, so nothing is
 * cut off) with libc's recv, and returns its length; throws the socket's error named by `op`. The
 * pipelined writer's acks and the dumps read their answers through it.
 */
export function recvDatagram(c: Conn, op: () => string): number {
  const fd = c.fd();
  for (;;) {
    const n = libc().recv(fd, c.rx, c.rx.length, MSG_PEEK | MSG_TRUNC);
    if (n < 0) {
      const e = errno();
      if (e === EINTR) continue;
      throw syscallError(op(), e);
    }
    if (n > c.rx.length) {
      c.rx = new Uint8Array(Math.max(n, c.rx.length * 2));
      continue;
    }
    const got = libc().recv(fd, c.rx, c.rx.length, 0);
    if (got >= 0) return got;
    const e = errno();
    if (e !== EINTR) throw syscallError(op(), e);
  }
}

// ---------------------------------------------------------------- raw requests

/** Builds a raw request (header `hdr` + attributes from `attrs`) into a new nl_msg stored in `out`. */
export function rawRequest(
  type: number,
  hdr: Uint8Array<ArrayBuffer>,
  attrs: (msg: NonNullable<Ptr>) => number,
  out: BigUint64Array<ArrayBuffer>,
): number {
  const msg = nl().nlmsg_alloc_simple(type, NLM_F_REQUEST);
  if (msg === null) return -NLE.NOMEM;
  const err = nl().nlmsg_append(msg, hdr, BigInt(hdr.length), NLMSG_ALIGNTO);
  const err2 = err < 0 ? err : attrs(msg);
  if (err2 < 0) {
    nl().nlmsg_free(msg);
    return err2;
  }
  out[0] = BigInt(Deno.UnsafePointer.value(msg));
  return 0;
}

/** Sends a raw request (header `hdr` + attributes from `attrs`) and waits for the kernel's ack. */
export function request(
  c: Conn,
  type: number,
  hdr: Uint8Array<ArrayBuffer>,
  op: () => string,
  attrs: (msg: NonNullable<Ptr>) => number,
): void {
  transact(c, op, (out) => rawRequest(type, hdr, attrs, out));
}

/** Overwrites `bytes.length` bytes of native memory at `p + offset` (an nlmsghdr field). */
export function patch(p: NonNullable<Ptr>, offset: number, bytes: Uint8Array): void {
  new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(p, offset + bytes.length)).set(bytes, offset);
}
