/**
 * Links: reads (with vxlan details and bridge-port data), creation of bridge/dummy/vxlan/veth/wireguard links,
 * changes (up, mtu, mac, master, hairpin, namespace) and deletion.
 * @module
 */
import { ParseError } from "../base/errors.ts";
import { cstr, nl, readCString, rt } from "../sys/ffi.ts";
import { NetlinkError, NLE } from "../sys/errors.ts";
import { linkFlagNames, operstateName, parseMac } from "./codec/format.ts";
import { closeFd, netnsLabel, openNetnsFd } from "../sys/netns.ts";
import {
  AF_BRIDGE,
  AF_LLC,
  AF_UNSPEC,
  IFF_UP,
  IFLA_BRPORT_MODE,
  IFLA_PROTINFO,
  NLA_F_NESTED,
  NLM_F_CREATE,
  NLM_F_EXCL,
  NLM_F_REQUEST,
  RTM_SETLINK,
  RTNL_BRIDGE_HAIRPIN_MODE,
  RTNL_LINK_VXLAN_F_GBP,
} from "./codec/consts.ts";
import { buildAddr, buildIpAddr, geterror, readIp, readMac } from "./conn.ts";
import type { Conn, Ptr } from "./conn.ts";
import { dump, transact } from "./io.ts";
import { queryOne } from "./batch.ts";
import {
  changeLinkRaw,
  createLinkRaw,
  deleteLinkRaw,
  getLinkRaw,
  type LinkChange,
  linkNamesRaw,
  type NewLinkAttrs,
} from "./linkmsg.ts";
import type {
  LinkInfo,
  LinkRef,
  NetnsRef,
  VethCreateOptions,
  VxlanCreateOptions,
  VxlanInfo,
} from "./types.ts";

/** ifindex → name of every link (for the `ifname` fields of addresses, routes and neighbours). */
export function linkNames(c: Conn): Map<number, string> {
  return linkNamesRaw(c);
}

// ---------------------------------------------------------------- reading

/** `NetlinkHandle.links()` on the socket of `c`: every link, with M-DOWN and bridge-port data. */
export function links(c: Conn): LinkInfo[] {
  const list: LinkInfo[] = [];
  dump(c, "link show", (out) => rt().rtnl_link_alloc_cache(c.live(), AF_UNSPEC, out), (o) => {
    list.push(linkInfo(c, o));
  });
  // iproute2 appends "M-DOWN" when the parent link (same namespace) is down.
  const upByIndex = new Map(list.map((l) => [l.index, l.up]));
  for (const l of list) {
    if (l.parent !== null && l.linkNetnsId === null && upByIndex.get(l.parent) !== true) {
      l.flags.push("M-DOWN");
    }
  }
  addBridgePorts(c, list);
  return list;
}

/**
 * One link by name or ifindex: a single RTM_GETLINK (rtnl_link_get_kernel), not a dump of every link, so
 * the cost does not grow with the number of links (a CNI host has one veth per pod). The parent (for
 * M-DOWN) and the master (is it a bridge?) are fetched the same way; only a bridge port pays for the
 * AF_BRIDGE dump that carries its hairpin flag, as in links().
 */
export function link(c: Conn, ref: LinkRef): LinkInfo | null {
  const info = getLink(c, ref);
  if (info === null) return null;
  if (info.parent !== null && info.linkNetnsId === null && getLink(c, info.parent)?.up !== true) {
    info.flags.push("M-DOWN");
  }
  if (info.master !== null && getLink(c, info.master)?.kind === "bridge") {
    const withMaster = [info, { ...info, index: info.master, kind: "bridge", master: null }];
    addBridgePorts(c, withMaster);
  }
  return info;
}

/** RTM_GETLINK of one link; null when there is no such link (or `ref` cannot name one). */
function getLink(c: Conn, ref: LinkRef): LinkInfo | null {
  const byIndex = typeof ref === "number";
  if (
    byIndex ? !Number.isInteger(ref) || ref <= 0 : typeof ref !== "string" || ref === "" || ref.length > 15
  ) {
    return null;
  }
  return getLinkRaw(c, ref);
}

function linkInfo(c: Conn, o: NonNullable<Ptr>): LinkInfo {
  const r = rt();
  const flags = r.rtnl_link_get_flags(o);
  const master = r.rtnl_link_get_master(o);
  const parent = r.rtnl_link_get_link(o);
  const kind = readCString(r.rtnl_link_get_type(o));
  const info: LinkInfo = {
    index: r.rtnl_link_get_ifindex(o),
    name: readCString(r.rtnl_link_get_name(o)) ?? "",
    kind,
    flags: linkFlagNames(flags),
    up: (flags & IFF_UP) !== 0,
    operstate: operstateName(r.rtnl_link_get_operstate(o)),
    mtu: r.rtnl_link_get_mtu(o),
    mac: readMac(c, r.rtnl_link_get_addr(o)),
    master: master > 0 ? master : null,
    parent: parent > 0 ? parent : null,
    linkNetnsId: r.rtnl_link_get_link_netnsid(o, c.i32) === 0 ? c.i32[0] : null,
  };
  if (kind === "vxlan") info.vxlan = vxlanInfo(c, o);
  return info;
}

function vxlanInfo(c: Conn, o: NonNullable<Ptr>): VxlanInfo {
  const r = rt();
  const u = c.u32;
  const vni = r.rtnl_link_vxlan_get_id(o, u) === 0 ? u[0] : 0;
  const port = r.rtnl_link_vxlan_get_port(o, u) === 0 ? u[0] : 0;
  const dev = r.rtnl_link_vxlan_get_link(o, u) === 0 && u[0] > 0 ? u[0] : null;
  const gbp = r.rtnl_link_vxlan_get_flags(o, u) === 0 && (u[0] & RTNL_LINK_VXLAN_F_GBP) !== 0;
  let local: string | null = null;
  const out = c.out.reset();
  if (r.rtnl_link_vxlan_get_local(o, out.buf) === 0 && out.value !== null) {
    const a = out.value;
    try {
      local = readIp(c, a);
    } finally {
      nl().nl_addr_put(a);
    }
  }
  return { vni, port, local, dev, learning: r.rtnl_link_vxlan_get_learning(o) > 0, gbp };
}

/** Fills `bridgePort` (hairpin) of links enslaved to a bridge, from an AF_BRIDGE link dump. */
function addBridgePorts(c: Conn, list: LinkInfo[]): void {
  const bridges = new Set(list.filter((l) => l.kind === "bridge").map((l) => l.index));
  const ports = list.filter((l) => l.master !== null && bridges.has(l.master));
  if (ports.length === 0) return;
  const hairpin = new Map<number, boolean>();
  dump(c, "bridge link show", (out) => rt().rtnl_link_alloc_cache(c.sock(), AF_BRIDGE, out), (o) => {
    const f = rt().rtnl_link_bridge_get_flags(o);
    if (f >= 0) hairpin.set(rt().rtnl_link_get_ifindex(o), (f & RTNL_BRIDGE_HAIRPIN_MODE) !== 0);
  });
  for (const p of ports) p.bridgePort = { hairpin: hairpin.get(p.index) ?? false };
}

// ---------------------------------------------------------------- links: create

function addLink(c: Conn, link: NonNullable<Ptr>, op: () => string): void {
  // Only the vxlan device (daemon start-up, not a hot path) still goes through a libnl object.
  transact(c, op, (out) => rt().rtnl_link_build_add_request(link, NLM_F_CREATE | NLM_F_EXCL, out));
}

function setCommon(
  link: NonNullable<Ptr>,
  name: string,
  opts: { mtu?: number; mac?: string },
  what = "mac",
): void {
  checkName(name, "name");
  rt().rtnl_link_set_name(link, cstr(name));
  if (opts.mtu !== undefined) rt().rtnl_link_set_mtu(link, checkMtu(opts.mtu));
  if (opts.mac !== undefined) {
    const a = buildAddr(AF_LLC, parseMac(opts.mac, what));
    rt().rtnl_link_set_addr(link, a);
    nl().nl_addr_put(a);
  }
}

/** Name, mtu and mac of a link to create, checked. */
function newAttrs(
  name: string,
  opts: { mtu?: number; mac?: string },
  field: string,
  what = "mac",
): NewLinkAttrs {
  checkName(name, field);
  return {
    name,
    ...(opts.mtu !== undefined ? { mtu: checkMtu(opts.mtu) } : {}),
    ...(opts.mac !== undefined ? { mac: parseMac(opts.mac, what) } : {}),
  };
}

function createSimple(c: Conn, kind: string, name: string, opts: { mtu?: number; mac?: string }): void {
  const op = () => `link add ${name} type ${kind}`;
  createLinkRaw(c, op, kind, newAttrs(name, opts, "name"));
}

/** `NetlinkHandle.createBridge()`: `ip link add NAME type bridge`. */
export function createBridge(c: Conn, name: string, opts: { mtu?: number; mac?: string } = {}): void {
  createSimple(c, "bridge", name, opts);
}

/** `NetlinkHandle.createDummy()`: `ip link add NAME type dummy`. */
export function createDummy(c: Conn, name: string, opts: { mtu?: number; mac?: string } = {}): void {
  createSimple(c, "dummy", name, opts);
}

/**
 * `NetlinkHandle.createWireguard()`: `ip link add NAME type wireguard`. A kernel without the module refuses
 * it with EOPNOTSUPP ("Unknown device type"), as for any link kind it does not know.
 */
export function createWireguard(c: Conn, name: string, opts: { mtu?: number } = {}): void {
  createSimple(c, "wireguard", name, opts);
}

/** `NetlinkHandle.createVxlan()`: `ip link add NAME type vxlan id VNI ...`. */
export function createVxlan(
  c: Conn,
  name: string,
  opts: VxlanCreateOptions,
): void {
  if (!Number.isInteger(opts.vni) || opts.vni < 0 || opts.vni > 0xffffff) {
    throw new ParseError("vni", `${opts.vni} is not a VXLAN id (0..16777215)`);
  }
  if (opts.port !== undefined && (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535)) {
    throw new ParseError("port", `${opts.port} is not a UDP port (0..65535)`);
  }
  const op = () =>
    `link add ${name} type vxlan id ${opts.vni}` + (opts.local ? ` local ${opts.local}` : "") +
    (opts.dev !== undefined ? ` dev ${opts.dev}` : "") + (opts.port ? ` dstport ${opts.port}` : "") +
    (opts.learning === false ? " nolearning" : "");
  c.retry(() => {
    const devIndex = opts.dev !== undefined ? c.index(opts.dev, op) : undefined;
    const r = rt();
    const link = r.rtnl_link_vxlan_alloc();
    if (link === null) throw new NetlinkError(op(), -NLE.NOMEM, geterror(-NLE.NOMEM));
    try {
      setCommon(link, name, opts);
      c.check(r.rtnl_link_vxlan_set_id(link, opts.vni), op);
      if (opts.port) c.check(r.rtnl_link_vxlan_set_port(link, opts.port), op);
      if (opts.local !== undefined) {
        const a = buildIpAddr(opts.local, "local");
        try {
          c.check(r.rtnl_link_vxlan_set_local(link, a), op);
        } finally {
          nl().nl_addr_put(a);
        }
      }
      if (devIndex !== undefined) c.check(r.rtnl_link_vxlan_set_link(link, devIndex), op);
      if (opts.learning !== undefined) {
        c.check(r.rtnl_link_vxlan_set_learning(link, opts.learning ? 1 : 0), op);
      }
      if (opts.gbp) c.check(r.rtnl_link_vxlan_set_flags(link, RTNL_LINK_VXLAN_F_GBP, 1), op);
      addLink(c, link, op);
    } finally {
      r.rtnl_link_put(link);
    }
  });
}

/** `NetlinkHandle.createVeth()`: a veth pair, the peer optionally created in another namespace. */
export function createVeth(
  c: Conn,
  name: string,
  peerName: string,
  opts: VethCreateOptions = {},
): void {
  const op = () =>
    `link add ${name} type veth peer name ${peerName}` +
    (opts.peerNetns ? ` netns ${netnsLabel(opts.peerNetns)}` : "") +
    (opts.txqlen !== undefined ? ` txqueuelen ${opts.txqlen}` : "") +
    (opts.peerTxqlen !== undefined ? ` (peer txqueuelen ${opts.peerTxqlen})` : "");
  const { txqlen, peerTxqlen = txqlen } = opts;
  for (const [field, q] of [["txqlen", txqlen], ["peerTxqlen", peerTxqlen]] as const) {
    if (q !== undefined && (!Number.isInteger(q) || q < 0 || q > 0xffffffff)) {
      throw new ParseError(field, `bad txqueuelen ${q} (0..4294967295)`);
    }
  }
  const a = newAttrs(name, { mtu: opts.mtu, mac: opts.mac }, "name");
  const p = newAttrs(peerName, { mtu: opts.mtu, mac: opts.peerMac }, "name", "peerMac");
  if (txqlen !== undefined) a.txqlen = txqlen;
  if (peerTxqlen !== undefined) p.txqlen = peerTxqlen;
  const fd = opts.peerNetns ? openNetnsFd(opts.peerNetns) : -1;
  try {
    if (fd >= 0) p.nsFd = fd;
    createLinkRaw(c, op, "veth", a, p);
  } finally {
    closeFd(fd);
  }
}

// ---------------------------------------------------------------- links: change

/** One RTM_SETLINK on the ifindex of `ref` with the changes `ch`. */
function change(c: Conn, ref: LinkRef, op: () => string, ch: LinkChange): void {
  c.retry(() => changeLinkRaw(c, c.index(ref, op), op, ch));
}

/** `NetlinkHandle.setUp()`: `ip link set dev REF up|down`. */
export function setUp(c: Conn, ref: LinkRef, up: boolean): void {
  change(c, ref, () => `link set dev ${ref} ${up ? "up" : "down"}`, { up });
}

/** `NetlinkHandle.setMtu()`: `ip link set dev REF mtu MTU`. */
export function setMtu(c: Conn, ref: LinkRef, mtu: number): void {
  checkMtu(mtu);
  change(c, ref, () => `link set dev ${ref} mtu ${mtu}`, { mtu });
}

/** `NetlinkHandle.setMac()`: `ip link set dev REF address MAC`. */
export function setMac(c: Conn, ref: LinkRef, mac: string): void {
  const bytes = parseMac(mac);
  change(c, ref, () => `link set dev ${ref} address ${mac}`, { mac: bytes });
}

/** `NetlinkHandle.setMaster()`: `ip link set dev REF master M|nomaster`. */
export function setMaster(c: Conn, ref: LinkRef, master: LinkRef | null): void {
  const op = () => `link set dev ${ref} ${master === null ? "nomaster" : `master ${master}`}`;
  c.retry(() => {
    const m = master === null ? 0 : c.index(master, op);
    change(c, ref, op, { master: m });
  });
}

/** `NetlinkHandle.setHairpin()`: hairpin mode of a bridge port. */
export function setHairpin(c: Conn, ref: LinkRef, on: boolean): void {
  const op = () => `link set dev ${ref} type bridge_slave hairpin ${on ? "on" : "off"}`;
  c.retry(() => {
    const index = c.index(ref, op);
    // libnl has no setter for bridge port flags on a plain link; send what `bridge link set` sends:
    // RTM_SETLINK, family AF_BRIDGE, IFLA_PROTINFO (nested) { IFLA_BRPORT_MODE u8 }.
    const ifi = new Uint8Array(16);
    new DataView(ifi.buffer).setUint8(0, AF_BRIDGE);
    new DataView(ifi.buffer).setInt32(4, index, true);
    queryOne(c, op, (w, s, x) => {
      const h = w.begin(RTM_SETLINK, NLM_F_REQUEST | x, s, 16);
      w.buf.set(ifi, h);
      w.nest(IFLA_PROTINFO | NLA_F_NESTED);
      w.u8(IFLA_BRPORT_MODE, on ? 1 : 0);
      w.nestEnd();
      w.end();
    });
  });
}

/** `NetlinkHandle.moveToNetns()`: `ip link set dev REF netns NS [name NEW]`. */
export function moveToNetns(c: Conn, ref: LinkRef, netns: NetnsRef, newName?: string): void {
  if (newName !== undefined) checkName(newName, "newName");
  const op = () => `link set dev ${ref} netns ${netnsLabel(netns)}${newName ? ` name ${newName}` : ""}`;
  const fd = openNetnsFd(netns);
  try {
    change(c, ref, op, { nsFd: fd, ...(newName !== undefined ? { name: newName } : {}) });
  } finally {
    closeFd(fd);
    c.forget();
  }
}

/** `NetlinkHandle.deleteLink()`: `ip link del dev REF`. */
export function deleteLink(c: Conn, ref: LinkRef): void {
  const op = () => `link del dev ${ref}`;
  try {
    c.retry(() => deleteLinkRaw(c, c.index(ref, op), op));
  } finally {
    c.forget();
  }
}

function checkName(name: string, field: string): void {
  if (typeof name !== "string" || name === "" || name.length > 15 || /[\s/:]/.test(name)) {
    throw new ParseError(
      field,
      `'${name}' is not a valid interface name (1..15 characters, no spaces, '/' or ':')`,
    );
  }
}

function checkMtu(mtu: number): number {
  if (!Number.isInteger(mtu) || mtu < 68 || mtu > 65535) {
    throw new ParseError("mtu", `${mtu} is not a valid MTU (68..65535)`);
  }
  return mtu;
}
