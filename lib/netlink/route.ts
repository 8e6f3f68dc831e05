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
  RT_TABLE_LOCAL,
  RTA_OIF,
  RTA_TABLE,
  RTM_F_CLONED,
  RTM_GETROUTE,
  RTNH_F_ONLINK,
} from "./codec/consts.ts";
import type { Conn } from "./conn.ts";
import { eachNexthop, newRouteMsg, readRouteMsg, routeDst } from "./routemsg.ts";
import { scan } from "./io.ts";
import { queryOne } from "./batch.ts";
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
  const m = newRouteMsg();
  scan(c, "route show", RTM_GETROUTE, rtmsg, (b, dv, o, len) => {
    // Route-cache exceptions (a PMTU learned from ICMP "fragmentation needed", a redirect) are not routes:
    // `ip route del` cannot remove them, and they expire by themselves.
    if (!readRouteMsg(b, dv, o, len, m) || (m.flags & RTM_F_CLONED) !== 0) return;
    if (opts.table !== undefined ? m.table !== opts.table : m.table === RT_TABLE_LOCAL) return;
    const base = {
      family: m.family,
      dst: routeDst(m),
      scope: routeScopeName(m.scope),
      table: m.table,
      protocol: protocolName(m.protocol),
      type: routeTypeName(m.type),
      prefsrc: m.prefsrc,
      metric: m.metric || null,
    };
    const hop = (gateway: string | null, ifindex: number, flags: number): RouteInfo => ({
      ...base,
      gateway,
      dev: ifindex > 0 ? ifindex : null,
      devName: ifindex > 0 ? names.get(ifindex) ?? null : null,
      flags: nexthopFlagNames(flags),
    });
    if (m.mpOff < 0) {
      // A route without gateway and device (blackhole, unreachable) has no next hop at all.
      list.push(
        m.single
          ? hop(m.gateway, m.oif ?? 0, m.flags & 0xff)
          : { ...base, gateway: null, dev: null, devName: null, flags: [] },
      );
      return;
    }
    eachNexthop(b, dv, m, (gw, ifindex, flags) => list.push(hop(gw, ifindex, flags)));
  }, false);
  return list;
}

/**
 * `ip route replace`. Without `scope`, the scope is chosen as iproute2 does (link for a route without
 * gateway, universe with one); protocol defaults to "boot" and table to main.
 */
export function replaceRoute(c: Conn, spec: RouteSpec): void {
  const op = () => routeOp("replace", spec);
  c.retry(() => queryOne(c, op, (w, s, x) => putRoute(w, spec, false, c.index, s, x, op)));
}

/** `ip route del`: matches any scope/protocol unless given. */
export function deleteRoute(c: Conn, spec: RouteDelSpec): void {
  const op = () => routeOp("del", spec);
  c.retry(() => queryOne(c, op, (w, s, x) => putRoute(w, spec, true, c.index, s, x, op)));
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
  const m = newRouteMsg();
  scan(c, op, RTM_GETROUTE, req.slice(0, at), (b, dv, o, len) => {
    if (!readRouteMsg(b, dv, o, len, m) || (opts.family && m.family !== opts.family)) return;
    if ((m.flags & RTM_F_CLONED) !== 0) return; // a route-cache exception, as in routes()
    if (opts.table !== undefined ? m.table !== opts.table : m.table === RT_TABLE_LOCAL) return;
    e.family = m.family;
    e.dst = routeDst(m);
    e.table = m.table;
    e.protocol = m.protocol;
    e.type = m.type;
    e.metric = m.metric || null;
    if (m.mpOff < 0) {
      if (oif && m.oif !== oif) return;
      e.gateway = m.gateway, e.dev = m.oif !== null && m.oif > 0 ? m.oif : null;
      e.onlink = (m.flags & RTNH_F_ONLINK) !== 0;
      each(e);
      return;
    }
    eachNexthop(b, dv, m, (gw, hdev, flags) => {
      if (oif && hdev !== oif) return;
      e.gateway = gw, e.dev = hdev > 0 ? hdev : null, e.onlink = (flags & RTNH_F_ONLINK) !== 0;
      each(e);
    });
  });
}

/** Masks host bits of a CIDR's address (exported for callers that build route specs from addresses). */
export function networkOf(cidr: string): string {
  const p = parsePrefix(cidr, "cidr");
  return `${formatIP(maskBytes(p.bytes, p.prefix))}/${p.prefix}`;
}
