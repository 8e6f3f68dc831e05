/**
 * Neighbours and bridge FDB entries: dumps, compact scans, replace and delete.
 * @module
 */
import { rt } from "../sys/ffi.ts";
import { ntfNames, nudNames } from "./codec/format.ts";
import {
  AF_BRIDGE,
  AF_INET,
  AF_INET6,
  AF_UNSPEC,
  fam,
  NDA_IFINDEX,
  RTM_GETNEIGH,
  RTM_NEWNEIGH,
} from "./codec/consts.ts";
import { readIp, readMac } from "./conn.ts";
import type { Conn, Ptr } from "./conn.ts";
import { rawDump, scan } from "./io.ts";
import { newNeighMsg, readNeighMsg } from "./neighmsg.ts";
import { queryOne } from "./batch.ts";
import {
  fdbOp,
  neighOp,
  putDeleteFdb,
  putDeleteNeigh,
  putReplaceFdb,
  putReplaceNeigh,
} from "./codec/encode.ts";
import { linkNames } from "./link.ts";
import type {
  FdbDelSpec,
  FdbInfo,
  FdbScanEntry,
  FdbSpec,
  LinkRef,
  NeighInfo,
  NeighScanEntry,
  NeighSpec,
} from "./types.ts";

/** `NetlinkHandle.neighbours()` on the socket of `c`: IPv4/IPv6 neighbour entries. */
export function neighbours(c: Conn, family?: 4 | 6): NeighInfo[] {
  const names = linkNames(c);
  const list: NeighInfo[] = [];
  neighDump(c, "neigh show", family === 4 ? AF_INET : family === 6 ? AF_INET6 : AF_UNSPEC, (o) => {
    const r = rt();
    const f = fam(r.rtnl_neigh_get_family(o));
    if (f === null || (family && f !== family)) return;
    const index = r.rtnl_neigh_get_ifindex(o);
    list.push({
      family: f,
      index,
      ifname: names.get(index) ?? "",
      dst: readIp(c, r.rtnl_neigh_get_dst(o)) ?? "",
      lladdr: readMac(c, r.rtnl_neigh_get_lladdr(o)),
      state: nudNames(r.rtnl_neigh_get_state(o)),
    });
  });
  return list;
}

/** `NetlinkHandle.fdb()` on the socket of `c`: bridge FDB entries of every device. */
export function fdb(c: Conn): FdbInfo[] {
  const names = linkNames(c);
  const list: FdbInfo[] = [];
  neighDump(c, "fdb show", AF_BRIDGE, (o) => {
    const r = rt();
    if (r.rtnl_neigh_get_family(o) !== AF_BRIDGE) return;
    const index = r.rtnl_neigh_get_ifindex(o);
    const master = r.rtnl_neigh_get_master(o);
    const vlan = r.rtnl_neigh_get_vlan(o);
    list.push({
      index,
      ifname: names.get(index) ?? "",
      mac: readMac(c, r.rtnl_neigh_get_lladdr(o)) ?? "",
      dst: readIp(c, r.rtnl_neigh_get_dst(o)),
      master: master > 0 ? master : null,
      flags: ntfNames(r.rtnl_neigh_get_flags(o)),
      state: nudNames(r.rtnl_neigh_get_state(o)),
      vlan: vlan >= 0 ? vlan : null,
    });
  });
  return list;
}

/** RTM_GETNEIGH dump of `family`; each parsed neighbour goes to `each`, then is released. */
function neighDump(c: Conn, op: string, family: number, each: (o: NonNullable<Ptr>) => void): void {
  const ndmsg = new Uint8Array(12);
  ndmsg[0] = family;
  const parsed = c.out2;
  rawDump(c, op, RTM_GETNEIGH, ndmsg, (nlh, type) => {
    if (type !== RTM_NEWNEIGH) return;
    if (rt().rtnl_neigh_parse(nlh, parsed.reset().buf) < 0 || parsed.value === null) return;
    const o = parsed.value;
    try {
      each(o);
    } finally {
      rt().rtnl_neigh_put(o);
    }
  });
}

/** `NetlinkHandle.replaceNeigh()`: `ip neigh replace DST lladdr MAC dev REF nud STATE`. */
export function replaceNeigh(c: Conn, n: NeighSpec): void {
  const op = () => neighOp("replace", n);
  c.retry(() => queryOne(c, op, (w, s, x) => putReplaceNeigh(w, n, c.index, s, x)));
}

/** `NetlinkHandle.deleteNeigh()`: `ip neigh del DST dev REF`. */
export function deleteNeigh(c: Conn, n: { dev: LinkRef; dst: string }): void {
  const op = () => neighOp("del", n);
  c.retry(() => queryOne(c, op, (w, s, x) => putDeleteNeigh(w, n, c.index, s, x)));
}

/** `NetlinkHandle.replaceFdb()`: `bridge fdb replace MAC dev REF dst IP self permanent`. */
export function replaceFdb(c: Conn, f: FdbSpec): void {
  const op = () => fdbOp("replace", f);
  c.retry(() => queryOne(c, op, (w, s, x) => putReplaceFdb(w, f, c.index, s, x)));
}

/** `NetlinkHandle.deleteFdb()`: `bridge fdb del MAC dev REF [dst IP] self`. */
export function deleteFdb(c: Conn, f: FdbDelSpec): void {
  const op = () => fdbOp("del", f);
  c.retry(() => queryOne(c, op, (w, s, x) => putDeleteFdb(w, f, c.index, s, x)));
}

// ---------------------------------------------------------------- compact scans

/** `NetlinkHandle.scanNeighbours()`: the compact neighbour scan of one device. */
export function scanNeighbours(
  c: Conn,
  opts: { family?: 4 | 6; dev: LinkRef },
  each: (n: Readonly<NeighScanEntry>) => void,
): void {
  const op = "neigh show";
  const index = c.index(opts.dev, () => `${op} dev ${opts.dev}`);
  // struct ndmsg (12; ifindex 0 as strict checking wants) + NDA_IFINDEX u32.
  const req = new Uint8Array(20);
  const rv = new DataView(req.buffer);
  req[0] = opts.family === 4 ? AF_INET : opts.family === 6 ? AF_INET6 : AF_UNSPEC;
  rv.setUint16(12, 8, true), rv.setUint16(14, NDA_IFINDEX, true), rv.setUint32(16, index, true);
  const e: NeighScanEntry = { family: 4, index, dst: "", lladdr: null, state: 0 };
  const m = newNeighMsg();
  scan(c, op, RTM_GETNEIGH, req, (b, dv, o, len) => {
    if (!readNeighMsg(b, dv, o, len, m)) return;
    const f = fam(m.family);
    if (f === null || (opts.family && f !== opts.family) || m.ifindex !== index || m.dst === null) return;
    e.family = f, e.dst = m.dst, e.lladdr = m.lladdr, e.state = m.state;
    each(e);
  });
}

/** `NetlinkHandle.scanFdb()`: the compact FDB scan of one device. */
export function scanFdb(c: Conn, dev: LinkRef, each: (f: Readonly<FdbScanEntry>) => void): void {
  const op = "fdb show";
  const index = c.index(dev, () => `${op} dev ${dev}`);
  // struct ndmsg, family AF_BRIDGE, ndm_ifindex = the port/device (the strict FDB dump's filter).
  const req = new Uint8Array(12);
  req[0] = AF_BRIDGE;
  new DataView(req.buffer).setInt32(4, index, true);
  const e: FdbScanEntry = { index, mac: "", dst: null };
  const m = newNeighMsg();
  scan(c, op, RTM_GETNEIGH, req, (b, dv, o, len) => {
    if (!readNeighMsg(b, dv, o, len, m)) return;
    if (m.family !== AF_BRIDGE || m.ifindex !== index || m.lladdr === null) return;
    e.mac = m.lladdr, e.dst = m.dst;
    each(e);
  });
}
