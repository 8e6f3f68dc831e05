/**
 * One RTM_NEWNEIGH message (struct ndmsg and its neighbour attributes) decoded: the one reader behind the
 * compact neighbour scan and the compact FDB scan, over the bounds-checked attribute walker of
 * codec/attrs.ts.
 * @module
 */
import { AttrWalk } from "./codec/attrs.ts";
import { NDA_DST, NDA_LLADDR } from "./codec/consts.ts";
import { formatMac } from "./codec/format.ts";
import { ip4or6 } from "./conn.ts";

/** What a neighbour message says, as read (one object reused for a whole dump). */
export interface NeighMsg {
  /** ndm_family: AF_INET, AF_INET6, AF_BRIDGE (an FDB entry), … */
  family: number;
  /** ndm_ifindex, ndm_state (NUD_*), ndm_flags (NTF_*). */
  ifindex: number;
  state: number;
  flags: number;
  /** NDA_DST (null when absent or not 4 or 16 bytes). */
  dst: string | null;
  /** NDA_LLADDR as a MAC (null when absent or not 6 bytes). */
  lladdr: string | null;
}

/** An empty {@link NeighMsg} to decode into. */
export function newNeighMsg(): NeighMsg {
  return { family: 0, ifindex: 0, state: 0, flags: 0, dst: null, lladdr: null };
}

/** struct ndmsg's size (linux/neighbour.h); the attributes follow it. */
const NDMSG_LEN = 12;

/**
 * Decodes the neighbour message body `b[o..o+len)` (`dv` over the same bytes) into `m`. False (and `m`
 * unchanged) when it is shorter than struct ndmsg: its fields would be read from the bytes after it.
 */
export function readNeighMsg(b: Uint8Array, dv: DataView, o: number, len: number, m: NeighMsg): boolean {
  if (len < NDMSG_LEN) return false;
  m.family = b[o];
  m.ifindex = dv.getInt32(o + 4, true);
  m.state = dv.getUint16(o + 8, true);
  m.flags = b[o + 10];
  m.dst = m.lladdr = null;
  for (const at = new AttrWalk(dv, o + 12, o + len); at.next();) {
    const t = at.type, v = at.v, vlen = at.vlen;
    if (t === NDA_DST) m.dst = ip4or6(b, v, vlen);
    else if (t === NDA_LLADDR && vlen === 6) m.lladdr = formatMac(b.subarray(v, v + 6));
  }
  return true;
}
