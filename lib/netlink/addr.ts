/**
 * Addresses: dump, add and delete.
 * @module
 */
import { parsePrefix, scopeValue } from "./codec/format.ts";
import { IFA_F_NOPREFIXROUTE } from "./codec/consts.ts";
import type { Conn } from "./conn.ts";
import { addrRaw, addrsRaw } from "./linkmsg.ts";
import { linkNames } from "./link.ts";
import type { AddrInfo, LinkRef } from "./types.ts";

/** `NetlinkHandle.addrs()` on the socket of `c`: every IPv4/IPv6 address (optionally one family). */
export function addrs(c: Conn, family?: 4 | 6): AddrInfo[] {
  return addrsRaw(c, linkNames(c), family);
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
  const p = parsePrefix(cidr, "cidr");
  c.retry(() =>
    addrRaw(c, false, c.index(ref, op), p.bytes, p.prefix, op, {
      scope,
      flags: opts.noprefixroute ? IFA_F_NOPREFIXROUTE : 0,
      broadcast: brd,
    })
  );
}

/** `NetlinkHandle.delAddr()`: `ip address del CIDR dev REF`. */
export function delAddr(c: Conn, ref: LinkRef, cidr: string): void {
  const op = () => `address del ${cidr} dev ${ref}`;
  const p = parsePrefix(cidr, "cidr");
  c.retry(() => addrRaw(c, true, c.index(ref, op), p.bytes, p.prefix, op));
}
