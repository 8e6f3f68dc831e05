/**
 * Conntrack entry deletion over ctnetlink (NETLINK_NETFILTER): dump the entries of one family, pick those
 * whose original tuple has the given L4 protocol and destination port, and delete each by that tuple
 * (IPCTNL_MSG_CT_DELETE with the dumped CTA_TUPLE_ORIG and CTA_ZONE copied verbatim), as
 * vishvananda/netlink's ConntrackDeleteFilter does for the reference portmap. A socket of its own through
 * libc (socket/send/recv from ffi.ts's table), one per call, in the calling thread's network namespace.
 *
 * Hand-written: no npm package speaks ctnetlink for Deno, and libnetfilter_conntrack would need a callback
 * API through FFI for the same few messages. Pointers never leave this file.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { errno, libc } from "../sys/ffi.ts";
import { AttrWalk } from "./codec/attrs.ts";
import {
  AF_INET,
  AF_INET6,
  AF_NETLINK,
  ENOENT,
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
  SOCK_CLOEXEC,
  SOCK_RAW,
} from "./codec/consts.ts";

const NETLINK_NETFILTER = 12;
const NFNL_SUBSYS_CTNETLINK = 1, IPCTNL_MSG_CT_GET = 1, IPCTNL_MSG_CT_DELETE = 2;
const CTA_TUPLE_ORIG = 1, CTA_ZONE = 18, CTA_TUPLE_PROTO = 2, CTA_PROTO_NUM = 1, CTA_PROTO_DST_PORT = 3;

/** A ctnetlink operation failed (errno from the kernel or libc). */
export class ConntrackError extends FlanctlError {
  readonly errno: number;
  constructor(op: string, errno: number) {
    super(`conntrack ${op}: errno ${errno}`, 1);
    this.errno = errno;
  }
}

/** What to delete: entries of `family` whose original tuple has protocol `protocol` and dst port `dstPort`. */
export interface ConntrackFilter {
  family: 4 | 6;
  /** IP protocol number (17 = UDP, 6 = TCP, 132 = SCTP). */
  protocol: number;
  dstPort: number;
}

function header(type: number, flags: number, seq: number, family: number, payload: Uint8Array): Uint8Array {
  const len = 16 + 4 + payload.length;
  const b = new Uint8Array(len);
  const v = new DataView(b.buffer);
  v.setUint32(0, len, true);
  v.setUint16(4, (NFNL_SUBSYS_CTNETLINK << 8) | type, true);
  v.setUint16(6, flags, true);
  v.setUint32(8, seq, true);
  b[16] = family; // nfgenmsg: family, version 0, res_id 0
  b.set(payload, 20);
  return b;
}

/** Attributes (type → bytes of the whole attribute, header included) of a message's payload. */
function attrs(b: Uint8Array, from: number, to: number): Map<number, Uint8Array> {
  const out = new Map<number, Uint8Array>();
  for (const at = new AttrWalk(new DataView(b.buffer, b.byteOffset), from, to); at.next();) {
    out.set(at.type, b.subarray(at.v - 4, at.v + at.vlen));
  }
  return out;
}

function matches(orig: Uint8Array, f: ConntrackFilter): boolean {
  const proto = attrs(orig, 4, orig.length).get(CTA_TUPLE_PROTO);
  if (!proto) return false;
  const p = attrs(proto, 4, proto.length);
  const num = p.get(CTA_PROTO_NUM), dport = p.get(CTA_PROTO_DST_PORT);
  if (!num || !dport || num.length < 5 || dport.length < 6) return false;
  return num[4] === f.protocol && ((dport[4] << 8) | dport[5]) === f.dstPort;
}

/** Receives until NLMSG_DONE (dump) or the ack of `seq`; hands every other message to `each`. */
function receive(fd: number, seq: number, each: (msg: Uint8Array) => void): void {
  const buf = new Uint8Array(65536);
  for (;;) {
    const n = libc().recv(fd, buf, buf.length, 0);
    if (n < 0) throw new ConntrackError("recv", errno());
    const v = new DataView(buf.buffer);
    for (let off = 0; off + 16 <= n;) {
      const len = v.getUint32(off, true), type = v.getUint16(off + 4, true), s = v.getUint32(off + 8, true);
      if (len < 16 || off + len > n) break;
      if (type === NLMSG_DONE) return;
      if (type === NLMSG_ERROR) {
        const err = -v.getInt32(off + 16, true);
        // ENOENT: the entry went away meanwhile (it timed out, or another DEL got it).
        if (err !== 0 && err !== ENOENT) throw new ConntrackError("delete", err);
        if (s === seq) return;
      } else each(buf.slice(off, off + len));
      off += (len + 3) & ~3;
    }
  }
}

/** Deletes the matching entries in the calling thread's network namespace. Returns how many. */
export function deleteConntrack(f: ConntrackFilter): number {
  const fd = libc().socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd < 0) throw new ConntrackError("socket", errno());
  const family = f.family === 4 ? AF_INET : AF_INET6;
  try {
    const victims: Uint8Array[] = [];
    const dump = header(IPCTNL_MSG_CT_GET, NLM_F_REQUEST | NLM_F_DUMP, 1, family, new Uint8Array(0));
    if (libc().send(fd, dump, dump.length, 0) < 0) throw new ConntrackError("send", errno());
    receive(fd, 1, (m) => {
      const a = attrs(m, 20, m.length);
      const orig = a.get(CTA_TUPLE_ORIG);
      if (!orig || !matches(orig, f)) return;
      const zone = a.get(CTA_ZONE);
      const payload = new Uint8Array(((orig.length + 3) & ~3) + (zone ? (zone.length + 3) & ~3 : 0));
      payload.set(orig, 0);
      if (zone) payload.set(zone, (orig.length + 3) & ~3);
      victims.push(payload);
    });
    let seq = 2;
    for (const p of victims) {
      const del = header(IPCTNL_MSG_CT_DELETE, NLM_F_REQUEST | NLM_F_ACK, seq, family, p);
      if (libc().send(fd, del, del.length, 0) < 0) throw new ConntrackError("send", errno());
      receive(fd, seq, () => {});
      seq++;
    }
    return victims.length;
  } finally {
    libc().close(fd);
  }
}
