/**
 * One RTM_NEWROUTE message (struct rtmsg and its route attributes) decoded: the one reader behind the route
 * dump (`routes()`), the compact route scan and the kernel's route lookup (`routeGet`), over the bounds-checked
 * attribute walker of codec/attrs.ts; and the next hops of an RTA_MULTIPATH attribute.
 * @module
 */
import { AttrWalk } from "./codec/attrs.ts";
import {
  fam,
  RTA_DST,
  RTA_GATEWAY,
  RTA_MULTIPATH,
  RTA_OIF,
  RTA_PREFSRC,
  RTA_PRIORITY,
  RTA_TABLE,
} from "./codec/consts.ts";
import { ip4or6 } from "./conn.ts";

/** struct rtmsg's size (linux/rtnetlink.h); the attributes follow it. */
const RTMSG_LEN = 12;

/** What a route message says, as read (one object reused for a whole dump). */
export interface RouteMsg {
  family: 4 | 6;
  /** rtm_dst_len: the prefix length (0: default). */
  dstLen: number;
  /** RTA_TABLE, else rtm_table. */
  table: number;
  /** rtm_protocol, rtm_scope, rtm_type, rtm_flags (the low byte: the next hop's RTNH_F_* flags). */
  protocol: number;
  scope: number;
  type: number;
  flags: number;
  /** RTA_DST, RTA_GATEWAY, RTA_PREFSRC (null when absent or not 4 or 16 bytes). */
  dst: string | null;
  gateway: string | null;
  prefsrc: string | null;
  /** RTA_OIF, RTA_PRIORITY (null when absent). */
  oif: number | null;
  metric: number | null;
  /** An RTA_GATEWAY or RTA_OIF came: the route has a single next hop (not blackhole-like, not multipath). */
  single: boolean;
  /** The RTA_MULTIPATH value's offset and length ({@link eachNexthop}); -1 without one. */
  mpOff: number;
  mpLen: number;
}

/** An empty {@link RouteMsg} to decode into. */
export function newRouteMsg(): RouteMsg {
  return {
    family: 4,
    dstLen: 0,
    table: 0,
    protocol: 0,
    scope: 0,
    type: 0,
    flags: 0,
    dst: null,
    gateway: null,
    prefsrc: null,
    oif: null,
    metric: null,
    single: false,
    mpOff: -1,
    mpLen: 0,
  };
}

/**
 * Decodes the route message body `b[o..o+len)` (`dv` over the same bytes) into `m`. False (and `m` left
 * partly written) when its address family is neither IPv4 nor IPv6.
 */
export function readRouteMsg(b: Uint8Array, dv: DataView, o: number, len: number, m: RouteMsg): boolean {
  const f = fam(b[o]);
  if (f === null || len < RTMSG_LEN) return false;
  m.family = f;
  m.dstLen = b[o + 1];
  m.table = b[o + 4];
  m.protocol = b[o + 5];
  m.scope = b[o + 6];
  m.type = b[o + 7];
  m.flags = dv.getUint32(o + 8, true);
  m.dst = m.gateway = m.prefsrc = null;
  m.oif = m.metric = null;
  m.single = false;
  m.mpOff = -1, m.mpLen = 0;
  for (const at = new AttrWalk(dv, o + RTMSG_LEN, o + len); at.next();) {
    const t = at.type, v = at.v, vlen = at.vlen;
    if (t === RTA_DST) m.dst = ip4or6(b, v, vlen);
    else if (t === RTA_GATEWAY) (m.gateway = ip4or6(b, v, vlen)), m.single = true;
    else if (t === RTA_OIF && vlen >= 4) (m.oif = dv.getInt32(v, true)), m.single = true;
    else if (t === RTA_PREFSRC) m.prefsrc = ip4or6(b, v, vlen);
    else if (t === RTA_PRIORITY && vlen >= 4) m.metric = dv.getUint32(v, true);
    else if (t === RTA_TABLE && vlen >= 4) m.table = dv.getUint32(v, true);
    else if (t === RTA_MULTIPATH) m.mpOff = v, m.mpLen = vlen;
  }
  return true;
}

/** The route's destination as iproute2 writes it: `default`, else `ADDR/LEN`. */
export function routeDst(m: RouteMsg): string {
  return m.dstLen === 0 ? "default" : `${m.dst ?? (m.family === 4 ? "0.0.0.0" : "::")}/${m.dstLen}`;
}

/**
 * Each next hop of the route's RTA_MULTIPATH (struct rtnexthop { u16 len; u8 flags; u8 hops; i32 ifindex }
 * and its own attributes): `fn(gateway, ifindex, flags)`. A next hop shorter than its header or running past
 * the attribute ends the walk.
 */
export function eachNexthop(
  b: Uint8Array,
  dv: DataView,
  m: RouteMsg,
  fn: (gateway: string | null, ifindex: number, flags: number) => void,
): void {
  const end = m.mpOff + m.mpLen;
  for (let h = m.mpOff; m.mpOff >= 0 && h + 8 <= end;) {
    const hlen = dv.getUint16(h, true);
    if (hlen < 8 || h + hlen > end) break;
    let gw: string | null = null;
    for (const at = new AttrWalk(dv, h + 8, h + hlen); at.next();) {
      if (at.type === RTA_GATEWAY) gw = ip4or6(b, at.v, at.vlen);
    }
    fn(gw, dv.getInt32(h + 4, true), b[h + 2]);
    h += (hlen + 3) & ~3;
  }
}
