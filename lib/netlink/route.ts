/**
 * Routes: dump (one entry per next hop), the compact scan, replace and delete.
 * @module
 */
import {
  formatIP,
  maskBytes,
  nexthopFlagNames,
  parsePrefix,
  protocolName,
  routeScopeName,
  routeTypeName,
} from "./codec/format.ts";
import {
  AF_INET,
  AF_INET6,
  AF_UNSPEC,
  fam,
  RT_TABLE_LOCAL,
  RTA_DST,
  RTA_GATEWAY,
  RTA_MULTIPATH,
  RTA_OIF,
  RTA_PREFSRC,
  RTA_PRIORITY,
  RTA_TABLE,
  RTM_GETROUTE,
  RTNH_F_ONLINK,
} from "./codec/consts.ts";
import { ip4or6 } from "./conn.ts";
import type { Conn } from "./conn.ts";
import { scan } from "./io.ts";
import { requestOne } from "./batch.ts";
import { putRoute, routeOp } from "./codec/encode.ts";
import { linkNames } from "./link.ts";
import type { LinkRef, RouteDelSpec, RouteInfo, RouteScanEntry, RouteSpec } from "./types.ts";

/**
 * `NetlinkHandle.routes()` on the socket of `c`: one RouteInfo per next hop. The dump is parsed here from
 * the receive buffer (as the compact scans do): no libnl route object and no FFI call per route, which
 * was most of the time for 10,000 routes.
 */
export function routes(c: Conn, opts: { family?: 4 | 6; table?: number } = {}): RouteInfo[] {
  const names = linkNames(c);
  const list: RouteInfo[] = [];
  const rtmsg = new Uint8Array(12);
  rtmsg[0] = opts.family === 4 ? AF_INET : opts.family === 6 ? AF_INET6 : AF_UNSPEC;
  scan(c, "route show", RTM_GETROUTE, rtmsg, (b, dv, o, len) => {
    const f = fam(b[o]);
    if (f === null) return;
    const dstLen = b[o + 1];
    let table = b[o + 4];
    const rtmFlags = dv.getUint32(o + 8, true);
    let dst: string | null = null, gw: string | null = null, dev = 0, prefsrc: string | null = null;
    let metric = 0, mpOff = -1, mpLen = 0, single = false;
    for (let a = o + 12; a + 4 <= o + len;) {
      const alen = dv.getUint16(a, true), atype = dv.getUint16(a + 2, true) & 0x3fff;
      if (alen < 4) break;
      const v = a + 4, vlen = alen - 4;
      if (atype === RTA_DST) dst = ip4or6(b, v, vlen);
      else if (atype === RTA_GATEWAY) (gw = ip4or6(b, v, vlen)), single = true;
      else if (atype === RTA_OIF && vlen >= 4) (dev = dv.getInt32(v, true)), single = true;
      else if (atype === RTA_PREFSRC) prefsrc = ip4or6(b, v, vlen);
      else if (atype === RTA_PRIORITY && vlen >= 4) metric = dv.getUint32(v, true);
      else if (atype === RTA_TABLE && vlen >= 4) table = dv.getUint32(v, true);
      else if (atype === RTA_MULTIPATH) [mpOff, mpLen] = [v, vlen];
      a += (alen + 3) & ~3;
    }
    if (opts.table !== undefined ? table !== opts.table : table === RT_TABLE_LOCAL) return;
    const base = {
      family: f,
      dst: dstLen === 0 ? "default" : `${dst ?? (f === 4 ? "0.0.0.0" : "::")}/${dstLen}`,
      scope: routeScopeName(b[o + 6]),
      table,
      protocol: protocolName(b[o + 5]),
      type: routeTypeName(b[o + 7]),
      prefsrc,
      metric: metric || null,
    };
    const hop = (gateway: string | null, ifindex: number, flags: number): RouteInfo => ({
      ...base,
      gateway,
      dev: ifindex > 0 ? ifindex : null,
      devName: ifindex > 0 ? names.get(ifindex) ?? null : null,
      flags: nexthopFlagNames(flags),
    });
    if (mpOff < 0) {
      // A route without gateway and device (blackhole, unreachable) has no next hop at all.
      list.push(
        single
          ? hop(gw, dev, rtmFlags & 0xff)
          : { ...base, gateway: null, dev: null, devName: null, flags: [] },
      );
      return;
    }
    // struct rtnexthop { u16 len; u8 flags; u8 hops; i32 ifindex; } + attributes (RTA_GATEWAY).
    for (let h = mpOff; h + 8 <= mpOff + mpLen;) {
      const hlen = dv.getUint16(h, true);
      if (hlen < 8) break;
      let hgw: string | null = null;
      for (let a = h + 8; a + 4 <= h + hlen;) {
        const alen = dv.getUint16(a, true), atype = dv.getUint16(a + 2, true) & 0x3fff;
        if (alen < 4) break;
        if (atype === RTA_GATEWAY) hgw = ip4or6(b, a + 4, alen - 4);
        a += (alen + 3) & ~3;
      }
      list.push(hop(hgw, dv.getInt32(h + 4, true), b[h + 2]));
      h += (hlen + 3) & ~3;
    }
  }, false);
  return list;
}

/**
 * `ip route replace`. Without `scope`, the scope is chosen as iproute2 does (link for a route without
 * gateway, universe with one); protocol defaults to "boot" and table to main.
 */
export function replaceRoute(c: Conn, spec: RouteSpec): void {
  const op = () => routeOp("replace", spec);
  c.retry(() => requestOne(c, op, (w, s, x) => putRoute(w, spec, false, c.index, s, x, op)));
}

/** `ip route del`: matches any scope/protocol unless given. */
export function deleteRoute(c: Conn, spec: RouteDelSpec): void {
  const op = () => routeOp("del", spec);
  c.retry(() => requestOne(c, op, (w, s, x) => putRoute(w, spec, true, c.index, s, x, op)));
}

// ---------------------------------------------------------------- compact scans

/** `NetlinkHandle.scanRoutes()`: the compact route scan (one reused entry per route and next hop). */
export function scanRoutes(
  c: Conn,
  opts: { family?: 4 | 6; table?: number; dev?: LinkRef },
  each: (r: Readonly<RouteScanEntry>) => void,
): void {
  const op = "route show";
  const oif = opts.dev !== undefined ? c.index(opts.dev, () => op) : 0;
  // struct rtmsg (12) + RTA_TABLE u32 + RTA_OIF u32, filters for strict dumps.
  const req = new Uint8Array(12 + 8 + 8);
  const rv = new DataView(req.buffer);
  req[0] = opts.family === 4 ? AF_INET : opts.family === 6 ? AF_INET6 : AF_UNSPEC;
  let at = 12;
  if (opts.table !== undefined) {
    req[4] = opts.table < 256 ? opts.table : 0;
    rv.setUint16(at, 8, true), rv.setUint16(at + 2, RTA_TABLE, true), rv.setUint32(at + 4, opts.table, true);
    at += 8;
  }
  if (oif) {
    rv.setUint16(at, 8, true), rv.setUint16(at + 2, RTA_OIF, true), rv.setUint32(at + 4, oif, true);
    at += 8;
  }
  const e: RouteScanEntry = {
    family: 4,
    dst: "",
    gateway: null,
    dev: null,
    onlink: false,
    table: 0,
    protocol: 0,
    type: 0,
    metric: null,
  };
  scan(c, op, RTM_GETROUTE, req.slice(0, at), (b, dv, o, len) => {
    const f = fam(b[o]);
    if (f === null || (opts.family && f !== opts.family)) return;
    const dstLen = b[o + 1];
    let table = b[o + 4];
    const flags = dv.getUint32(o + 8, true);
    let dst: string | null = null, gw: string | null = null, dev: number | null = null;
    let metric: number | null = null;
    let mpOff = -1, mpLen = 0;
    for (let a = o + 12; a + 4 <= o + len;) {
      const alen = dv.getUint16(a, true), atype = dv.getUint16(a + 2, true) & 0x3fff;
      if (alen < 4) break;
      const v = a + 4, vlen = alen - 4;
      if (atype === RTA_DST) dst = ip4or6(b, v, vlen);
      else if (atype === RTA_GATEWAY) gw = ip4or6(b, v, vlen);
      else if (atype === RTA_OIF && vlen >= 4) dev = dv.getInt32(v, true);
      else if (atype === RTA_PRIORITY && vlen >= 4) metric = dv.getUint32(v, true);
      else if (atype === RTA_TABLE && vlen >= 4) table = dv.getUint32(v, true);
      else if (atype === RTA_MULTIPATH) [mpOff, mpLen] = [v, vlen];
      a += (alen + 3) & ~3;
    }
    if (opts.table !== undefined ? table !== opts.table : table === RT_TABLE_LOCAL) return;
    e.family = f;
    e.dst = dstLen === 0 ? "default" : `${dst ?? (f === 4 ? "0.0.0.0" : "::")}/${dstLen}`;
    e.table = table;
    e.protocol = b[o + 5];
    e.type = b[o + 7];
    e.metric = metric || null;
    if (mpOff < 0) {
      if (oif && dev !== oif) return;
      e.gateway = gw, e.dev = dev !== null && dev > 0 ? dev : null, e.onlink = (flags & RTNH_F_ONLINK) !== 0;
      each(e);
      return;
    }
    // struct rtnexthop { u16 len; u8 flags; u8 hops; i32 ifindex; } + attributes (RTA_GATEWAY).
    for (let h = mpOff; h + 8 <= mpOff + mpLen;) {
      const hlen = dv.getUint16(h, true);
      if (hlen < 8) break;
      const hdev = dv.getInt32(h + 4, true);
      let hgw: string | null = null;
      for (let a = h + 8; a + 4 <= h + hlen;) {
        const alen = dv.getUint16(a, true), atype = dv.getUint16(a + 2, true) & 0x3fff;
        if (alen < 4) break;
        if (atype === RTA_GATEWAY) hgw = ip4or6(b, a + 4, alen - 4);
        a += (alen + 3) & ~3;
      }
      if (!oif || hdev === oif) {
        e.gateway = hgw, e.dev = hdev > 0 ? hdev : null, e.onlink = (b[h + 2] & RTNH_F_ONLINK) !== 0;
        each(e);
      }
      h += (hlen + 3) & ~3;
    }
  });
}

/** Masks host bits of a CIDR's address (exported for callers that build route specs from addresses). */
export function networkOf(cidr: string): string {
  const p = parsePrefix(cidr, "cidr");
  return `${formatIP(maskBytes(p.bytes, p.prefix))}/${p.prefix}`;
}
