/**
 * Route, neighbour and FDB requests as netlink bytes ({@link MsgWriter}): the same messages the libnl
 * object API built (rtnl_route_build_*_request, rtnl_neigh_build_*_request), with the same validation and
 * the same iproute2-style operation names, for the one-at-a-time calls of the handle and for
 * {@link NetlinkHandle.writeMany}'s pipelined batches.
 * @module
 */
import { ParseError } from "../../base/errors.ts";
import { parseIPBytes, parseMac, parsePrefix, protocolValue, scopeValue } from "./format.ts";
import {
  AF_BRIDGE,
  AF_INET,
  AF_INET6,
  NDA_DST,
  NDA_LLADDR,
  NLM_F_CREATE,
  NLM_F_REPLACE,
  NLM_F_REQUEST,
  NTF_SELF,
  NUD_NOARP,
  NUD_PERMANENT,
  NUD_REACHABLE,
  RT_SCOPE_LINK,
  RT_SCOPE_NOWHERE,
  RT_SCOPE_UNIVERSE,
  RT_TABLE_MAIN,
  RTA_DST,
  RTA_GATEWAY,
  RTA_OIF,
  RTA_PREFSRC,
  RTA_PRIORITY,
  RTA_TABLE,
  RTM_DELNEIGH,
  RTM_DELROUTE,
  RTM_NEWNEIGH,
  RTM_NEWROUTE,
  RTN_BLACKHOLE,
  RTN_UNICAST,
  RTNH_F_ONLINK,
} from "./consts.ts";
import type { MsgWriter } from "./msg.ts";
import type { FdbDelSpec, FdbSpec, LinkRef, NeighSpec, RouteDelSpec } from "../types.ts";

/**
 * Dotted-quad IPv4 text to bytes in `out` (no allocation: the hot path of a 5,000-peer batch), false for
 * anything else (IPv6, bad text: the callers fall back to the full parser, which names the field).
 */
function ip4Into(s: string, out: Uint8Array): boolean {
  if (typeof s !== "string" || s.length < 7 || s.length > 15) return false;
  let part = 0, cur = -1;
  for (let i = 0; i <= s.length; i++) {
    const ch = i < s.length ? s.charCodeAt(i) : 46;
    if (ch === 46) {
      if (cur < 0 || cur > 255 || part > 3) return false;
      out[part++] = cur;
      cur = -1;
    } else if (ch >= 48 && ch <= 57) {
      if (cur === 0) return false; // no leading zeros, as IPAddr parses
      cur = (cur < 0 ? 0 : cur * 10) + (ch - 48);
    } else return false;
  }
  return part === 4;
}

const V4 = new Uint8Array(4), V4B = new Uint8Array(4), MAC = new Uint8Array(6);

/** IP text to bytes: IPv4 into a reused 4-byte buffer (`slot`), else the full parser's new array. */
function ipBytes(s: string, field: string, slot = V4): Uint8Array {
  return ip4Into(s, slot) ? slot : parseIPBytes(s, field);
}

function hexVal(ch: number): number {
  return ch >= 48 && ch <= 57
    ? ch - 48
    : ch >= 97 && ch <= 102
    ? ch - 87
    : ch >= 65 && ch <= 70
    ? ch - 55
    : -1;
}

/** "aa:bb:cc:dd:ee:ff" into a reused buffer; anything else goes through parseMac (its errors). */
function macBytes(s: string, field: string): Uint8Array {
  if (typeof s === "string" && s.length === 17) {
    let ok = true;
    for (let i = 0; i < 6 && ok; i++) {
      const hi = hexVal(s.charCodeAt(i * 3)), lo = hexVal(s.charCodeAt(i * 3 + 1));
      const sep = i < 5 ? s.charCodeAt(i * 3 + 2) : 58;
      if (hi < 0 || lo < 0 || (sep !== 58 && sep !== 45)) ok = false;
      else MAC[i] = hi * 16 + lo;
    }
    if (ok) return MAC;
  }
  return parseMac(s, field);
}

/** Resolves a link reference to its ifindex (the handle's cached lookup). */
export type IndexOf = (ref: LinkRef, op: () => string) => number;

/** The operation name of a route request (iproute2 style). */
export function routeOp(verb: string, r: RouteDelSpec): string {
  return `route ${verb} ${r.dst}` + (r.via ? ` via ${r.via}` : "") +
    (r.dev !== undefined ? ` dev ${r.dev}` : "") + (r.onlink ? " onlink" : "") +
    (r.scope ? ` scope ${r.scope}` : "") +
    (r.table !== undefined && r.table !== RT_TABLE_MAIN ? ` table ${r.table}` : "") +
    (r.metric !== undefined ? ` metric ${r.metric}` : "");
}

/**
 * Writes `ip route replace` (or, with `forDelete`, `ip route del`) of `spec` into `w` as one message with
 * sequence number `seq` and extra nlmsghdr flags `extra` (NLM_F_ACK). Throws ParseError for bad input and
 * NetlinkError for an unknown device, before anything is written.
 *
 * Replace: without `scope`, link for a route without gateway and universe with one (as iproute2 and
 * libnl's guess); protocol defaults to "boot", table to main. Delete: scope "nowhere" and protocol 0
 * unless given, so any scope/protocol matches.
 */
export function putRoute(
  w: MsgWriter,
  spec: RouteDelSpec,
  forDelete: boolean,
  index: IndexOf,
  seq: number,
  extra: number,
  op: () => string,
): void {
  if (!spec || typeof spec.dst !== "string") throw new ParseError("dst", "missing route destination");
  const via = spec.via !== undefined ? ipBytes(spec.via, "via", V4B) : null;
  const src = spec.src !== undefined ? parseIPBytes(spec.src, "src") : null;
  // "default" takes the family of the gateway, else of the source address (as `ip route` does).
  const hint = via ?? src;
  const dst = prefixOf(spec.dst, hint ? (hint.length === 4 ? 4 : 6) : 4);
  if (via && (via.length === 4 ? 4 : 6) !== dst.family) {
    throw new ParseError("via", `gateway ${spec.via} is not in the address family of ${spec.dst}`);
  }
  // As libnl's rtnl_route_set_pref_src (NLE_AF_MISMATCH): the kernel refuses a source of the other family.
  if (src && (src.length === 4 ? 4 : 6) !== dst.family) {
    throw new ParseError("src", `source ${spec.src} is not in the address family of ${spec.dst}`);
  }
  const table = spec.table ?? RT_TABLE_MAIN;
  if (!Number.isInteger(table) || table < 0 || table > 0xffffffff) {
    throw new ParseError("table", `bad table ${table}`);
  }
  const blackhole = spec.type === "blackhole";
  const scope = spec.scope !== undefined
    ? scopeValue(spec.scope, "scope")
    : forDelete
    ? RT_SCOPE_NOWHERE
    : via !== null || blackhole
    ? RT_SCOPE_UNIVERSE
    : RT_SCOPE_LINK;
  const protocol = forDelete && spec.protocol === undefined ? 0 : protocolValue(spec.protocol, "protocol");
  // RTA_PRIORITY is a u32: a larger metric would be written as another (2^32 as 0).
  if (
    spec.metric !== undefined &&
    (!Number.isInteger(spec.metric) || spec.metric < 0 || spec.metric > 0xffffffff)
  ) {
    throw new ParseError("metric", `bad metric ${spec.metric}`);
  }
  const dev = spec.dev !== undefined ? index(spec.dev, op) : 0;
  const flags = forDelete ? NLM_F_REQUEST | extra : NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE | extra;
  const h = w.begin(forDelete ? RTM_DELROUTE : RTM_NEWROUTE, flags, seq, 12);
  const b = w.buf;
  b[h] = dst.family === 4 ? AF_INET : AF_INET6;
  b[h + 1] = dst.prefix;
  b[h + 4] = table < 256 ? table : 0;
  b[h + 5] = protocol;
  b[h + 6] = scope;
  b[h + 7] = blackhole ? RTN_BLACKHOLE : RTN_UNICAST;
  w.dv.setUint32(h + 8, spec.onlink && (dev || via) ? RTNH_F_ONLINK : 0, true);
  w.u32(RTA_TABLE, table);
  if (dst.prefix > 0) w.bytes(RTA_DST, dst.bytes);
  if (spec.metric !== undefined) w.u32(RTA_PRIORITY, spec.metric);
  if (src !== null) w.bytes(RTA_PREFSRC, src);
  if (via !== null) w.bytes(RTA_GATEWAY, via);
  if (dev) w.u32(RTA_OIF, dev);
  w.end();
}

const DST4 = { bytes: V4 as Uint8Array, prefix: 0, family: 4 as 4 | 6 };

/** A route destination: "a.b.c.d/n" without allocating, else the full parser (ParseError names "dst"). */
function prefixOf(s: string, defaultFamily: 4 | 6): { bytes: Uint8Array; prefix: number; family: 4 | 6 } {
  const slash = typeof s === "string" ? s.indexOf("/") : -1;
  if (slash > 0 && slash < s.length - 1 && s.length - slash <= 3 && ip4Into(s.slice(0, slash), V4)) {
    let p = 0;
    for (let i = slash + 1; i < s.length; i++) {
      const ch = s.charCodeAt(i);
      if (ch < 48 || ch > 57) p = 99;
      else p = p * 10 + ch - 48;
    }
    if (p <= 32) {
      DST4.prefix = p;
      return DST4;
    }
  }
  return parsePrefix(s, "dst", { allowDefault: true, defaultFamily });
}

/** The NUD state value of a neighbour state name. */
function nudOf(state: string): number {
  const nud = state === "permanent"
    ? NUD_PERMANENT
    : state === "reachable"
    ? NUD_REACHABLE
    : state === "noarp"
    ? NUD_NOARP
    : -1;
  if (nud < 0) {
    throw new ParseError("state", `unknown neighbour state '${state}' (permanent, reachable, noarp)`);
  }
  return nud;
}

/** ndmsg (family, ifindex, state, flags) + NDA_DST / NDA_LLADDR, as rtnl_neigh_build_*_request sends. */
function putNdmsg(
  w: MsgWriter,
  type: number,
  flags: number,
  seq: number,
  family: number,
  ifindex: number,
  state: number,
  ntf: number,
  dst: Uint8Array | null,
  lladdr: Uint8Array | null,
): void {
  const h = w.begin(type, flags, seq, 12);
  w.buf[h] = family;
  w.dv.setInt32(h + 4, ifindex, true);
  w.dv.setUint16(h + 8, state, true);
  w.buf[h + 10] = ntf;
  if (dst !== null) w.bytes(NDA_DST, dst);
  if (lladdr !== null) w.bytes(NDA_LLADDR, lladdr);
  w.end();
}

/** The operation name of a neighbour request. */
export function neighOp(
  verb: "replace" | "del",
  n: { dev: LinkRef; dst: string; lladdr?: string; state?: string },
) {
  return verb === "replace"
    ? `neigh replace ${n.dst} lladdr ${n.lladdr} dev ${n.dev} nud ${n.state ?? "permanent"}`
    : `neigh del ${n.dst} dev ${n.dev}`;
}

/** `ip neigh replace DST lladdr MAC dev REF nud STATE` into `w`. */
export function putReplaceNeigh(
  w: MsgWriter,
  n: NeighSpec,
  index: IndexOf,
  seq: number,
  extra: number,
): void {
  const nud = nudOf(n.state ?? "permanent");
  const dst = ipBytes(n.dst, "dst");
  const mac = macBytes(n.lladdr, "lladdr");
  const ifindex = index(n.dev, () => neighOp("replace", n));
  putNdmsg(
    w,
    RTM_NEWNEIGH,
    NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE | extra,
    seq,
    dst.length === 4 ? AF_INET : AF_INET6,
    ifindex,
    nud,
    0,
    dst,
    mac,
  );
}

/** `ip neigh del DST dev REF` into `w`. */
export function putDeleteNeigh(
  w: MsgWriter,
  n: { dev: LinkRef; dst: string },
  index: IndexOf,
  seq: number,
  extra: number,
): void {
  const dst = ipBytes(n.dst, "dst");
  const ifindex = index(n.dev, () => neighOp("del", n));
  putNdmsg(
    w,
    RTM_DELNEIGH,
    NLM_F_REQUEST | extra,
    seq,
    dst.length === 4 ? AF_INET : AF_INET6,
    ifindex,
    NUD_PERMANENT,
    0,
    dst,
    null,
  );
}

/** The operation name of an FDB request. */
export function fdbOp(verb: "replace" | "del", f: FdbDelSpec): string {
  return verb === "replace"
    ? `fdb replace ${f.mac} dev ${f.dev} dst ${f.dst} self permanent`
    : `fdb del ${f.mac} dev ${f.dev}${f.dst ? ` dst ${f.dst}` : ""} self`;
}

/** `bridge fdb replace MAC dev REF dst IP self permanent` into `w`. */
export function putReplaceFdb(
  w: MsgWriter,
  f: FdbSpec,
  index: IndexOf,
  seq: number,
  extra: number,
): void {
  const mac = macBytes(f.mac, "mac");
  const dst = ipBytes(f.dst, "dst");
  const ifindex = index(f.dev, () => fdbOp("replace", f));
  putNdmsg(
    w,
    RTM_NEWNEIGH,
    NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE | extra,
    seq,
    AF_BRIDGE,
    ifindex,
    NUD_PERMANENT,
    NTF_SELF,
    dst,
    mac,
  );
}

/** `bridge fdb del MAC dev REF [dst IP] self` into `w`. */
export function putDeleteFdb(
  w: MsgWriter,
  f: FdbDelSpec,
  index: IndexOf,
  seq: number,
  extra: number,
): void {
  const mac = macBytes(f.mac, "mac");
  const dst = f.dst !== undefined ? ipBytes(f.dst, "dst") : null;
  const ifindex = index(f.dev, () => fdbOp("del", f));
  putNdmsg(
    w,
    RTM_DELNEIGH,
    NLM_F_REQUEST | extra,
    seq,
    AF_BRIDGE,
    ifindex,
    NUD_PERMANENT,
    NTF_SELF,
    dst,
    mac,
  );
}
