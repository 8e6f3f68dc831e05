/**
 * RTM_GETROUTE for one packet (`ip route get DST [from SRC] [iif DEV] fibmatch`): the kernel's own route
 * lookup, including the input path (forwarding, rp_filter) when an input interface is given. The answer
 * is the matched FIB entry: its prefix, table, next hop and output device.
 * @module
 */
import { nl } from "../sys/ffi.ts";
import {
  AF_INET,
  AF_INET6,
  RTA_DST,
  RTA_IIF,
  RTA_OIF,
  RTA_SRC,
  RTM_F_FIB_MATCH,
  RTM_F_LOOKUP_TABLE,
  RTM_GETROUTE,
  RTM_NEWROUTE,
} from "./codec/consts.ts";
import { nexthopFlagNames, parseIPBytes, routeScopeName, routeTypeName } from "./codec/format.ts";
import type { Conn } from "./conn.ts";
import { newRouteMsg, readRouteMsg, routeDst } from "./routemsg.ts";
import { rawRequest, readAck } from "./io.ts";
import { errnoText } from "../sys/errors.ts";
import { ParseError } from "../base/errors.ts";

/** One packet to look up. */
export interface RouteQuery {
  /** Destination address (no prefix). */
  dst: string;
  /** Source address, when the packet has one. */
  src?: string;
  /** Input interface (ifindex or name): the packet arrives there and is forwarded (input lookup). */
  iif?: number | string;
  /** Output interface to force (`oif`), rarely needed. */
  oif?: number | string;
}

/** The kernel's answer: the matched route, or the errno of a failed lookup. */
export interface RouteLookup {
  /** Matched route prefix ("10.244.2.0/24", "default"), or null when the lookup failed. */
  route: string | null;
  /** "unicast", "local", "unreachable", … */
  type: string | null;
  table: number | null;
  gateway: string | null;
  /** Output ifindex and name (null for local delivery without device). */
  dev: number | null;
  devName: string | null;
  prefsrc: string | null;
  scope: string | null;
  /** Next-hop flags ("onlink", …). */
  flags: string[];
  metric: number | null;
  /** Kernel errno of a failed lookup (ENETUNREACH 101, EHOSTUNREACH 113, EXDEV 18 for rp_filter, …). */
  errno: number | null;
  /** strerror() text (and the kernel's extended-ack message) of a failed lookup. */
  error: string | null;
}

/** Runs the lookup on the handle's socket (see {@link RouteQuery}). Never throws for a failed lookup. */
export function routeGet(c: Conn, q: RouteQuery, names: (ifindex: number) => string | null): RouteLookup {
  const sk = c.live();
  const dst = parseIPBytes(q.dst, "dst");
  const src = q.src ? parseIPBytes(q.src, "src") : null;
  if (src && src.length !== dst.length) {
    throw new ParseError("src", `'${q.src}' is not of the family of ${q.dst}`);
  }
  const op = () => `route get ${q.dst}${q.src ? ` from ${q.src}` : ""}${q.iif ? ` iif ${q.iif}` : ""}`;
  const iif = q.iif !== undefined ? c.index(q.iif, op) : null;
  const oif = q.oif !== undefined ? c.index(q.oif, op) : null;
  // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags (u32).
  const hdr = new Uint8Array(12);
  hdr[0] = dst.length === 4 ? AF_INET : AF_INET6;
  hdr[1] = dst.length * 8;
  hdr[2] = src ? src.length * 8 : 0;
  new DataView(hdr.buffer).setUint32(8, RTM_F_LOOKUP_TABLE | RTM_F_FIB_MATCH, true);
  const u32 = (v: number) => new Uint8Array(new Uint32Array([v]).buffer);
  const out = c.out.reset();
  c.check(
    rawRequest(RTM_GETROUTE, hdr, (msg) => {
      let e = nl().nla_put(msg, RTA_DST, dst.length, dst);
      if (e >= 0 && src) e = nl().nla_put(msg, RTA_SRC, src.length, src);
      if (e >= 0 && iif !== null) e = nl().nla_put(msg, RTA_IIF, 4, u32(iif));
      if (e >= 0 && oif !== null) e = nl().nla_put(msg, RTA_OIF, 4, u32(oif));
      return e;
    }, out.buf),
    op,
  );
  const msg = out.value!;
  try {
    c.check(nl().nl_send_auto(sk, msg), op);
  } finally {
    nl().nlmsg_free(msg);
  }
  const res: RouteLookup = {
    route: null,
    type: null,
    table: null,
    gateway: null,
    dev: null,
    devName: null,
    prefsrc: null,
    scope: null,
    flags: [],
    metric: null,
    errno: null,
    error: null,
  };
  // The RTM_NEWROUTE answer comes before the ack (auto-ack is on); an error comes as the ack itself.
  const [err, text] = readAck(c, op, (p, type, len) => {
    if (type !== RTM_NEWROUTE) return;
    const b = new Uint8Array(len);
    Deno.UnsafePointerView.copyInto(p, b);
    const m = newRouteMsg();
    if (!readRouteMsg(b, new DataView(b.buffer), 16, len - 16, m)) return;
    res.route = routeDst(m);
    res.type = routeTypeName(m.type);
    res.table = m.table;
    res.scope = routeScopeName(m.scope);
    res.flags = nexthopFlagNames(m.flags & 0xff);
    res.gateway = m.gateway, res.prefsrc = m.prefsrc, res.dev = m.oif, res.metric = m.metric;
  });
  if (err !== 0) {
    res.errno = err;
    res.error = text ? `${errnoText(err)}: ${text}` : errnoText(err);
    return res;
  }
  if (res.dev !== null) res.devName = names(res.dev);
  return res;
}
