/**
 * Addresses: dump, add and delete.
 * @module
 */
import { nl, rt } from "./ffi.ts";
import { addrScopeName, parsePrefix, scopeValue } from "./format.ts";
import { AF_INET, AF_INET6, fam, IFA_F_NOPREFIXROUTE, NLM_F_EXCL } from "./consts.ts";
import { buildAddr, readIp } from "./conn.ts";
import type { Conn, Ptr } from "./conn.ts";
import { dump, transact } from "./io.ts";
import { linkNames } from "./link.ts";
import type { AddrInfo, LinkRef } from "./types.ts";

/** `NetlinkHandle.addrs()` on the socket of `c`: every IPv4/IPv6 address (optionally one family). */
export function addrs(c: Conn, family?: 4 | 6): AddrInfo[] {
  const names = linkNames(c);
  const list: AddrInfo[] = [];
  dump(c, "address show", (out) => rt().rtnl_addr_alloc_cache(c.live(), out), (o) => {
    const r = rt();
    const f = fam(r.rtnl_addr_get_family(o));
    if (f === null || (family && f !== family)) return;
    const index = r.rtnl_addr_get_ifindex(o);
    list.push({
      index,
      ifname: names.get(index) ?? "",
      family: f,
      local: readIp(c, r.rtnl_addr_get_local(o)) ?? "",
      prefix: r.rtnl_addr_get_prefixlen(o),
      scope: addrScopeName(r.rtnl_addr_get_scope(o)),
    });
  });
  return list;
}

/** Builds an address object for `cidr` on `ref`, lets `fill` add to it, sends it with `send`, frees it. */
function addrObj(
  c: Conn,
  ref: LinkRef,
  cidr: string,
  op: () => string,
  build: (obj: NonNullable<Ptr>, out: BigUint64Array<ArrayBuffer>) => number,
  fill?: (obj: NonNullable<Ptr>) => void,
): void {
  const p = parsePrefix(cidr, "cidr");
  c.retry(() => {
    const index = c.index(ref, op);
    const r = rt();
    const obj = r.rtnl_addr_alloc()!;
    try {
      const local = buildAddr(p.family === 4 ? AF_INET : AF_INET6, p.bytes, p.prefix);
      r.rtnl_addr_set_ifindex(obj, index);
      const e = r.rtnl_addr_set_local(obj, local);
      nl().nl_addr_put(local);
      c.check(e, op);
      r.rtnl_addr_set_prefixlen(obj, p.prefix);
      fill?.(obj);
      transact(c, op, (out) => build(obj, out));
    } finally {
      r.rtnl_addr_put(obj);
    }
  });
}

/** `NetlinkHandle.addAddr()`: `ip address add CIDR dev REF` with scope, noprefixroute, `brd +`. */
export function addAddr(
  c: Conn,
  ref: LinkRef,
  cidr: string,
  opts: { scope?: "universe" | "link" | "host"; noprefixroute?: boolean; broadcast?: boolean } = {},
): void {
  const scope = scopeValue(opts.scope, "scope");
  const op = () =>
    `address add ${cidr}` + (opts.broadcast ? " brd +" : "") + ` dev ${ref}` +
    (opts.noprefixroute ? " noprefixroute" : "");
  // `brd +`: the subnet's last address, for IPv4 subnets that have one (prefix < 31), as iproute2 and
  // the Go netlink library (CNI plugins) set it.
  let brd: Uint8Array<ArrayBuffer> | null = null;
  if (opts.broadcast) {
    const p = parsePrefix(cidr, "cidr");
    if (p.family === 4 && p.prefix < 31) {
      const host = p.prefix === 0 ? 0xffffffff : (1 << (32 - p.prefix)) - 1;
      const v = (new DataView(p.bytes.buffer, p.bytes.byteOffset, 4).getUint32(0) | host) >>> 0;
      brd = new Uint8Array(4);
      new DataView(brd.buffer).setUint32(0, v);
    }
  }
  addrObj(c, ref, cidr, op, (obj, out) => rt().rtnl_addr_build_add_request(obj, NLM_F_EXCL, out), (a) => {
    rt().rtnl_addr_set_scope(a, scope);
    if (opts.noprefixroute) rt().rtnl_addr_set_flags(a, IFA_F_NOPREFIXROUTE);
    if (brd !== null) {
      const b = buildAddr(AF_INET, brd);
      const e = rt().rtnl_addr_set_broadcast(a, b);
      nl().nl_addr_put(b);
      c.check(e, op);
    }
  });
}

/** `NetlinkHandle.delAddr()`: `ip address del CIDR dev REF`. */
export function delAddr(c: Conn, ref: LinkRef, cidr: string): void {
  const op = () => `address del ${cidr} dev ${ref}`;
  addrObj(c, ref, cidr, op, (obj, out) => rt().rtnl_addr_build_delete_request(obj, 0, out));
}
