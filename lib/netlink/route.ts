/**
 * Routes: dump (one entry per next hop), the compact scan, replace and delete.
 * @module
 */
import { ParseError } from "../errors.ts";
import { nl, rt } from "./ffi.ts";
import {
  formatIP,
  maskBytes,
  nexthopFlagNames,
  parseIPBytes,
  parsePrefix,
  protocolName,
  protocolValue,
  routeScopeName,
  routeTypeName,
  scopeValue,
} from "./format.ts";
import {
  AF_INET,
  AF_INET6,
  AF_UNSPEC,
  fam,
  NLM_F_CREATE,
  NLM_F_REPLACE,
  RT_SCOPE_NOWHERE,
  RT_TABLE_LOCAL,
  RT_TABLE_MAIN,
  RTA_DST,
  RTA_GATEWAY,
  RTA_MULTIPATH,
  RTA_OIF,
  RTA_PRIORITY,
  RTA_TABLE,
  RTM_GETROUTE,
  RTM_NEWROUTE,
  RTNH_F_ONLINK,
} from "./consts.ts";
import { buildAddr, buildIpAddr, ip4or6, readIp } from "./conn.ts";
import type { Conn, Ptr } from "./conn.ts";
import { rawDump, scan, transact } from "./io.ts";
import { linkNames } from "./link.ts";
import type { LinkRef, RouteInfo, RouteScanEntry, RouteSpec } from "./types.ts";

/** `NetlinkHandle.routes()` on the socket of `c`: one RouteInfo per next hop. */
export function routes(c: Conn, opts: { family?: 4 | 6; table?: number } = {}): RouteInfo[] {
  const names = linkNames(c);
  const af = opts.family === 4 ? AF_INET : opts.family === 6 ? AF_INET6 : AF_UNSPEC;
  const list: RouteInfo[] = [];
  const rtmsg = new Uint8Array(12);
  rtmsg[0] = af;
  const parsed = c.out2;
  rawDump(c, "route show", RTM_GETROUTE, rtmsg, (nlh, type) => {
    if (type !== RTM_NEWROUTE) return;
    if (rt().rtnl_route_parse(nlh, parsed.reset().buf) < 0 || parsed.value === null) return;
    const o = parsed.value;
    try {
      routeInfos(c, o, opts, names, list);
    } finally {
      rt().rtnl_route_put(o);
    }
  });
  return list;
}

function routeInfos(
  c: Conn,
  o: NonNullable<Ptr>,
  opts: { table?: number },
  names: Map<number, string>,
  list: RouteInfo[],
): void {
  {
    const r = rt();
    const f = fam(r.rtnl_route_get_family(o));
    if (f === null) return;
    const table = r.rtnl_route_get_table(o);
    if (opts.table !== undefined ? table !== opts.table : table === RT_TABLE_LOCAL) return;
    const d = r.rtnl_route_get_dst(o);
    const plen = d === null ? 0 : nl().nl_addr_get_prefixlen(d);
    const dst = plen === 0 ? "default" : `${readIp(c, d) ?? (f === 4 ? "0.0.0.0" : "::")}/${plen}`;
    const base = {
      family: f,
      dst,
      scope: routeScopeName(r.rtnl_route_get_scope(o)),
      table,
      protocol: protocolName(r.rtnl_route_get_protocol(o)),
      type: routeTypeName(r.rtnl_route_get_type(o)),
      prefsrc: readIp(c, r.rtnl_route_get_pref_src(o)),
      metric: r.rtnl_route_get_priority(o) || null,
    };
    // libnl merges IPv6 routes that differ only in next hop (and multipath routes carry several):
    // one RouteInfo per next hop, as iproute2 shows separate IPv6 routes.
    const nnh = r.rtnl_route_get_nnexthops(o);
    if (nnh === 0) {
      list.push({ ...base, gateway: null, dev: null, devName: null, flags: [] });
      return;
    }
    for (let i = 0; i < nnh; i++) {
      const nh = r.rtnl_route_nexthop_n(o, i);
      if (nh === null) continue;
      const idx = r.rtnl_route_nh_get_ifindex(nh);
      const dev = idx > 0 ? idx : null;
      list.push({
        ...base,
        gateway: readIp(c, r.rtnl_route_nh_get_gateway(nh)),
        dev,
        devName: dev === null ? null : names.get(dev) ?? null,
        flags: nexthopFlagNames(r.rtnl_route_nh_get_flags(nh)),
      });
    }
  }
}

function routeOp(verb: string, r: RouteSpec): string {
  return `route ${verb} ${r.dst}` + (r.via ? ` via ${r.via}` : "") +
    (r.dev !== undefined ? ` dev ${r.dev}` : "") + (r.onlink ? " onlink" : "") +
    (r.scope ? ` scope ${r.scope}` : "") +
    (r.table !== undefined && r.table !== RT_TABLE_MAIN ? ` table ${r.table}` : "") +
    (r.metric !== undefined ? ` metric ${r.metric}` : "");
}

/** Builds a route object from `spec` and hands it to `send`; frees it. */
/** rtm_type of a blackhole route (linux/rtnetlink.h). */
const RTN_BLACKHOLE = 6;

function withRoute(
  c: Conn,
  spec: RouteSpec,
  forDelete: boolean,
  op: () => string,
  build: (route: NonNullable<Ptr>, out: BigUint64Array<ArrayBuffer>) => number,
) {
  if (!spec || typeof spec.dst !== "string") throw new ParseError("dst", "missing route destination");
  const via = spec.via !== undefined ? parseIPBytes(spec.via, "via") : null;
  const dst = parsePrefix(spec.dst, "dst", {
    allowDefault: true,
    defaultFamily: via ? (via.length === 4 ? 4 : 6) : 4,
  });
  if (via && (via.length === 4 ? 4 : 6) !== dst.family) {
    throw new ParseError("via", `gateway ${spec.via} is not in the address family of ${spec.dst}`);
  }
  const table = spec.table ?? RT_TABLE_MAIN;
  if (!Number.isInteger(table) || table < 0 || table > 0xffffffff) {
    throw new ParseError("table", `bad table ${table}`);
  }
  const af = dst.family === 4 ? AF_INET : AF_INET6;
  c.retry(() => {
    const dev = spec.dev !== undefined ? c.index(spec.dev, op) : null;
    const r = rt();
    const route = r.rtnl_route_alloc()!;
    try {
      const d = buildAddr(af, dst.bytes, dst.prefix);
      const e = r.rtnl_route_set_dst(route, d);
      nl().nl_addr_put(d);
      c.check(e, op);
      r.rtnl_route_set_table(route, table);
      if (spec.type === "blackhole") r.rtnl_route_set_type(route, RTN_BLACKHOLE);
      if (spec.scope !== undefined) r.rtnl_route_set_scope(route, scopeValue(spec.scope, "scope"));
      else if (forDelete) r.rtnl_route_set_scope(route, RT_SCOPE_NOWHERE);
      else if (spec.type === "blackhole") r.rtnl_route_set_scope(route, scopeValue("universe", "scope"));
      r.rtnl_route_set_protocol(
        route,
        forDelete && spec.protocol === undefined ? 0 : protocolValue(spec.protocol, "protocol"),
      );
      if (spec.metric !== undefined) {
        if (!Number.isInteger(spec.metric) || spec.metric < 0) {
          throw new ParseError("metric", `bad metric ${spec.metric}`);
        }
        r.rtnl_route_set_priority(route, spec.metric);
      }
      if (spec.src !== undefined) {
        const s = buildIpAddr(spec.src, "src");
        const e2 = r.rtnl_route_set_pref_src(route, s);
        nl().nl_addr_put(s);
        c.check(e2, op);
      }
      if (dev !== null || via !== null) {
        const nh = r.rtnl_route_nh_alloc()!;
        if (dev !== null) r.rtnl_route_nh_set_ifindex(nh, dev);
        if (via !== null) {
          const g = buildAddr(af, via);
          r.rtnl_route_nh_set_gateway(nh, g);
          nl().nl_addr_put(g);
        }
        if (spec.onlink) r.rtnl_route_nh_set_flags(nh, RTNH_F_ONLINK);
        r.rtnl_route_add_nexthop(route, nh); // the route owns nh from here
      }
      transact(c, op, (out) => build(route, out));
    } finally {
      r.rtnl_route_put(route);
    }
  });
}

/**
 * `ip route replace`. Without `scope`, the scope is chosen as iproute2 does (link for a route without
 * gateway, universe with one); protocol defaults to "boot" and table to main.
 */
export function replaceRoute(c: Conn, spec: RouteSpec): void {
  const op = () => routeOp("replace", spec);
  withRoute(
    c,
    spec,
    false,
    op,
    (route, out) => rt().rtnl_route_build_add_request(route, NLM_F_CREATE | NLM_F_REPLACE, out),
  );
}

/** `ip route del`: matches any scope/protocol unless given. */
export function deleteRoute(c: Conn, spec: RouteSpec): void {
  const op = () => routeOp("del", spec);
  withRoute(c, spec, true, op, (route, out) => rt().rtnl_route_build_del_request(route, 0, out));
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
