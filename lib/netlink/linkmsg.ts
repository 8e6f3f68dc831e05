/**
 * Link and address messages as bytes: RTM_GETLINK of one link parsed into a {@link LinkInfo}, the link
 * name table from a raw dump, RTM_NEWLINK (bridge, dummy, veth), RTM_SETLINK changes, RTM_DELLINK,
 * RTM_NEWADDR / RTM_DELADDR and the address dump. The same requests and the same views the libnl object
 * API gave, for the paths a CNI call takes: each libnl object function is a symbol to bind on a plugin's
 * first call (docs/performance.md, "Smaller figures"), these need none beyond sending and receiving.
 * @module
 */
import { NetlinkError, NLE } from "../sys/errors.ts";
import { addrScopeName, formatMac, linkFlagNames, operstateName } from "./codec/format.ts";
import {
  AF_INET,
  AF_INET6,
  AF_UNSPEC,
  fam,
  IFA_ADDRESS,
  IFA_BROADCAST,
  IFA_FLAGS,
  IFA_LOCAL,
  IFF_UP,
  IFLA_ADDRESS,
  IFLA_IFNAME,
  IFLA_INFO_DATA,
  IFLA_INFO_KIND,
  IFLA_LINK,
  IFLA_LINK_NETNSID,
  IFLA_LINKINFO,
  IFLA_MASTER,
  IFLA_MTU,
  IFLA_NET_NS_FD,
  IFLA_OPERSTATE,
  IFLA_TXQLEN,
  IFLA_VXLAN_GBP,
  IFLA_VXLAN_ID,
  IFLA_VXLAN_LEARNING,
  IFLA_VXLAN_LINK,
  IFLA_VXLAN_LOCAL,
  IFLA_VXLAN_LOCAL6,
  IFLA_VXLAN_PORT,
  NLM_F_CREATE,
  NLM_F_EXCL,
  NLM_F_REQUEST,
  RTM_DELADDR,
  RTM_DELLINK,
  RTM_GETADDR,
  RTM_GETLINK,
  RTM_NEWADDR,
  RTM_NEWLINK,
  RTM_SETLINK,
  VETH_INFO_PEER,
} from "./codec/consts.ts";
import { attrStr, AttrWalk } from "./codec/attrs.ts";
import { geterror, ip4or6 } from "./conn.ts";
import type { Conn } from "./conn.ts";
import { queryOne } from "./batch.ts";
import { scan } from "./io.ts";
import type { MsgWriter } from "./codec/msg.ts";
import type { AddrInfo, LinkInfo, VxlanInfo } from "./types.ts";

/** struct ifinfomsg's size (linux/rtnetlink.h); the attributes follow it. */
const IFINFOMSG_LEN = 16;

/**
 * An RTM_NEWLINK message body (ifinfomsg + attributes at `b[o..o+len)`) as a LinkInfo; null when it is
 * shorter than struct ifinfomsg (its fields would be read from the bytes after it).
 */
export function parseLink(b: Uint8Array, dv: DataView, o: number, len: number): LinkInfo | null {
  if (len < IFINFOMSG_LEN) return null;
  const flags = dv.getUint32(o + 8, true);
  const info: LinkInfo = {
    index: dv.getInt32(o + 4, true),
    name: "",
    kind: null,
    flags: linkFlagNames(flags),
    up: (flags & IFF_UP) !== 0,
    operstate: operstateName(0),
    mtu: 0,
    mac: null,
    master: null,
    parent: null,
    linkNetnsId: null,
  };
  let dataOff = -1, dataLen = 0;
  for (const at = new AttrWalk(dv, o + IFINFOMSG_LEN, o + len); at.next();) {
    const t = at.type, v = at.v, vlen = at.vlen;
    if (t === IFLA_IFNAME) info.name = attrStr(b, v, vlen);
    else if (t === IFLA_MTU && vlen >= 4) info.mtu = dv.getUint32(v, true);
    else if (t === IFLA_ADDRESS && vlen !== 0 && vlen !== 4 && vlen !== 16) {
      info.mac = formatMac(b.subarray(v, v + vlen));
    } else if (t === IFLA_MASTER && vlen >= 4) info.master = dv.getInt32(v, true) || null;
    else if (t === IFLA_LINK && vlen >= 4) info.parent = dv.getInt32(v, true) || null;
    else if (t === IFLA_OPERSTATE && vlen >= 1) info.operstate = operstateName(b[v]);
    else if (t === IFLA_LINK_NETNSID && vlen >= 4) info.linkNetnsId = dv.getInt32(v, true);
    else if (t === IFLA_LINKINFO) {
      for (const inner = new AttrWalk(dv, v, v + vlen); inner.next();) {
        const it = inner.type, iv = inner.v, ivlen = inner.vlen;
        if (it === IFLA_INFO_KIND) info.kind = attrStr(b, iv, ivlen);
        else if (it === IFLA_INFO_DATA) [dataOff, dataLen] = [iv, ivlen];
      }
    }
  }
  if (info.master !== null && info.master <= 0) info.master = null;
  if (info.parent !== null && info.parent <= 0) info.parent = null;
  if (info.kind === "vxlan") {
    const x: VxlanInfo = { vni: 0, port: 0, local: null, dev: null, learning: false, gbp: false };
    if (dataOff >= 0) {
      for (const at = new AttrWalk(dv, dataOff, dataOff + dataLen); at.next();) {
        const t = at.type, v = at.v, vlen = at.vlen;
        if (t === IFLA_VXLAN_ID && vlen >= 4) x.vni = dv.getUint32(v, true);
        else if (t === IFLA_VXLAN_PORT && vlen >= 2) x.port = dv.getUint16(v, false);
        else if (t === IFLA_VXLAN_LINK && vlen >= 4) x.dev = dv.getUint32(v, true) || null;
        else if ((t === IFLA_VXLAN_LOCAL || t === IFLA_VXLAN_LOCAL6) && x.local === null) {
          x.local = ip4or6(b, v, vlen);
        } else if (t === IFLA_VXLAN_LEARNING && vlen >= 1) x.learning = b[v] > 0;
        else if (t === IFLA_VXLAN_GBP) x.gbp = true;
      }
    }
    info.vxlan = x;
  }
  return info;
}

/** RTM_GETLINK of one link by ifindex or name; null when the kernel has no such link. */
export function getLinkRaw(c: Conn, ref: number | string): LinkInfo | null {
  let info: LinkInfo | null = null;
  try {
    queryOne(c, () => `link show dev ${ref}`, (w, s, x) => {
      const h = w.begin(RTM_GETLINK, NLM_F_REQUEST | x, s, 16);
      if (typeof ref === "number") w.dv.setInt32(h + 4, ref, true);
      else w.str(IFLA_IFNAME, ref);
      w.end();
    }, (b, dv, o, len, type) => {
      if (type === RTM_NEWLINK && info === null) info = parseLink(b, dv, o, len);
    });
  } catch (e) {
    if (e instanceof NetlinkError && (e.code === -NLE.NODEV || e.code === -NLE.OBJ_NOTFOUND)) return null;
    throw e;
  }
  return info;
}

/** ifindex of link `name`, or a NetlinkError "Cannot find device" named `op`. */
export function indexOfName(c: Conn, name: string, op: () => string): number {
  const l = getLinkRaw(c, name);
  if (l === null) {
    throw new NetlinkError(op(), -NLE.NODEV, () => geterror(-NLE.NODEV), `Cannot find device "${name}"`);
  }
  return l.index;
}

/** ifindex → name of every link, from a raw RTM_GETLINK dump. */
export function linkNamesRaw(c: Conn): Map<number, string> {
  const m = new Map<number, string>();
  const req = new Uint8Array(16);
  scan(c, "link show", RTM_GETLINK, req, (b, dv, o, len) => {
    let name = "";
    for (const at = new AttrWalk(dv, o + IFINFOMSG_LEN, o + len); at.next();) {
      const t = at.type, v = at.v, vlen = at.vlen;
      if (t === IFLA_IFNAME) name = attrStr(b, v, vlen);
    }
    m.set(dv.getInt32(o + 4, true), name);
  }, false);
  return m;
}

/** The common attributes of a link to create: name, mtu, mac, txqlen. */
export interface NewLinkAttrs {
  name: string;
  mtu?: number;
  mac?: Uint8Array;
  txqlen?: number;
  /** Namespace fd to create the link in. */
  nsFd?: number;
}

function putCommon(w: MsgWriter, a: NewLinkAttrs): void {
  w.str(IFLA_IFNAME, a.name);
  if (a.mtu !== undefined) w.u32(IFLA_MTU, a.mtu);
  if (a.mac !== undefined) w.bytes(IFLA_ADDRESS, a.mac);
  if (a.txqlen !== undefined) w.u32(IFLA_TXQLEN, a.txqlen);
  if (a.nsFd !== undefined) w.u32(IFLA_NET_NS_FD, a.nsFd);
}

/** `ip link add NAME type KIND` (bridge, dummy), or a veth pair when `peer` is given. */
export function createLinkRaw(c: Conn, op: () => string, kind: string, a: NewLinkAttrs, peer?: NewLinkAttrs) {
  queryOne(c, op, (w, s, x) => {
    w.begin(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | x, s, 16);
    putCommon(w, a);
    w.nest(IFLA_LINKINFO);
    w.str(IFLA_INFO_KIND, kind);
    if (peer) {
      w.nest(IFLA_INFO_DATA);
      w.nest(VETH_INFO_PEER);
      w.raw(16); // the peer's struct ifinfomsg
      putCommon(w, peer);
      w.nestEnd();
      w.nestEnd();
    }
    w.nestEnd();
    w.end();
  });
}

/** What an RTM_SETLINK changes. */
export interface LinkChange {
  up?: boolean;
  mtu?: number;
  mac?: Uint8Array;
  /** ifindex of the new master, 0 to release. */
  master?: number;
  nsFd?: number;
  name?: string;
}

/** `ip link set dev INDEX ...`: one RTM_SETLINK. */
export function changeLinkRaw(c: Conn, index: number, op: () => string, ch: LinkChange): void {
  queryOne(c, op, (w, s, x) => {
    const h = w.begin(RTM_SETLINK, NLM_F_REQUEST | x, s, 16);
    w.buf[h] = AF_UNSPEC;
    w.dv.setInt32(h + 4, index, true);
    if (ch.up !== undefined) {
      w.dv.setUint32(h + 8, ch.up ? IFF_UP : 0, true);
      w.dv.setUint32(h + 12, IFF_UP, true);
    }
    if (ch.mtu !== undefined) w.u32(IFLA_MTU, ch.mtu);
    if (ch.mac !== undefined) w.bytes(IFLA_ADDRESS, ch.mac);
    if (ch.master !== undefined) w.u32(IFLA_MASTER, ch.master);
    if (ch.nsFd !== undefined) w.u32(IFLA_NET_NS_FD, ch.nsFd);
    if (ch.name !== undefined) w.str(IFLA_IFNAME, ch.name);
    w.end();
  });
}

/** `ip link del dev INDEX`. */
export function deleteLinkRaw(c: Conn, index: number, op: () => string): void {
  queryOne(c, op, (w, s, x) => {
    const h = w.begin(RTM_DELLINK, NLM_F_REQUEST | x, s, 16);
    w.dv.setInt32(h + 4, index, true);
    w.end();
  });
}

/** RTM_NEWADDR (flags NLM_F_CREATE|NLM_F_EXCL) or RTM_DELADDR of `local/prefix` on `index`. */
export function addrRaw(
  c: Conn,
  del: boolean,
  index: number,
  local: Uint8Array,
  prefix: number,
  op: () => string,
  opts: { scope?: number; flags?: number; broadcast?: Uint8Array | null } = {},
): void {
  queryOne(c, op, (w, s, x) => {
    const h = w.begin(
      del ? RTM_DELADDR : RTM_NEWADDR,
      del ? NLM_F_REQUEST | x : NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | x,
      s,
      8,
    );
    const flags = opts.flags ?? 0;
    w.buf[h] = local.length === 4 ? AF_INET : AF_INET6;
    w.buf[h + 1] = prefix;
    w.buf[h + 2] = flags & 0xff;
    w.buf[h + 3] = opts.scope ?? 0;
    w.dv.setUint32(h + 4, index, true);
    w.bytes(IFA_LOCAL, local);
    w.bytes(IFA_ADDRESS, local);
    if (opts.broadcast) w.bytes(IFA_BROADCAST, opts.broadcast);
    if (flags & ~0xff) w.u32(IFA_FLAGS, flags);
    w.end();
  });
}

/** Every IPv4/IPv6 address (optionally one family), from a raw RTM_GETADDR dump. */
export function addrsRaw(c: Conn, names: Map<number, string>, family?: 4 | 6): AddrInfo[] {
  const list: AddrInfo[] = [];
  const req = new Uint8Array(8);
  req[0] = family === 4 ? AF_INET : family === 6 ? AF_INET6 : AF_UNSPEC;
  scan(c, "address show", RTM_GETADDR, req, (b, dv, o, len) => {
    const f = fam(b[o]);
    if (f === null || (family && f !== family)) return;
    let local: string | null = null, address: string | null = null;
    for (const at = new AttrWalk(dv, o + 8, o + len); at.next();) {
      const t = at.type, v = at.v, vlen = at.vlen;
      if (t === IFA_LOCAL) local = ip4or6(b, v, vlen);
      else if (t === IFA_ADDRESS) address = ip4or6(b, v, vlen);
    }
    const index = dv.getUint32(o + 4, true);
    list.push({
      index,
      ifname: names.get(index) ?? "",
      family: f,
      local: local ?? address ?? "",
      prefix: b[o + 1],
      scope: addrScopeName(b[o + 3]),
    });
  }, false);
  return list;
}
