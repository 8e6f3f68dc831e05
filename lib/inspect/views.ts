/**
 * The `-o json` contract of `flanctl inspect`: one explicit view type per object, built from the kernel
 * layer's values (lib/netlink/types.ts stays free to change). Interfaces are always named as `ip -j`
 * names them (`dev: "flannel.1"`) with the ifindex beside (`ifindex`), keys are camelCase, and flannel.*
 * neighbour and FDB entries carry the remote subnet they serve. Pure functions; no kernel access.
 * @module
 */
import type { AddrInfo, FdbInfo, LinkInfo, NeighInfo, RouteInfo } from "../netlink/types.ts";
import type { VethPair } from "../observe/veths.ts";
import { IPAddr } from "../base/cidr.ts";

/** A link. `master`/`parent`/`vxlan.dev` are names (null when unknown), their ifindexes beside them. */
export interface LinkView {
  name: string;
  ifindex: number;
  kind: string | null;
  flags: string[];
  up: boolean;
  operstate: string;
  mtu: number;
  mac: string | null;
  master: string | null;
  masterIfindex: number | null;
  /** The parent/peer's name when it lives in this namespace (linkNetnsId null), else null. */
  parent: string | null;
  parentIfindex: number | null;
  linkNetnsId: number | null;
  vxlan?: {
    vni: number;
    port: number;
    local: string | null;
    dev: string | null;
    devIfindex: number | null;
    learning: boolean;
    gbp: boolean;
  };
  bridgePort?: { hairpin: boolean };
}

/** An address on `dev`. */
export interface AddrView {
  dev: string;
  ifindex: number;
  family: 4 | 6;
  local: string;
  prefix: number;
  scope: string;
}

/** A route (one per next hop). */
export interface RouteView {
  family: 4 | 6;
  dst: string;
  gateway: string | null;
  dev: string | null;
  ifindex: number | null;
  scope: string;
  flags: string[];
  table: number;
  protocol: string;
  type: string;
  prefsrc: string | null;
  metric: number | null;
}

/** A neighbour (ARP/NDP) entry; `subnet`: the remote subnet a flannel.* entry serves, else null. */
export interface NeighView {
  family: 4 | 6;
  dev: string;
  ifindex: number;
  dst: string;
  lladdr: string | null;
  state: string[];
  subnet: string | null;
}

/** An FDB entry; `master` by name; `subnet` as for {@link NeighView}. */
export interface FdbView {
  dev: string;
  ifindex: number;
  mac: string;
  dst: string | null;
  master: string | null;
  masterIfindex: number | null;
  flags: string[];
  state: string[];
  vlan: number | null;
  subnet: string | null;
}

/** A veth pair: the end here (`netns` null = this namespace, "NAME" or "pid:PID") and its peer. */
export interface VethView {
  name: string;
  ifindex: number;
  netns: string | null;
  peer: { name: string | null; ifindex: number; netns: string | null };
}

/** `inspect` / `inspect all -o json`. */
export interface InspectView {
  links: LinkView[];
  veths: VethView[];
  addrs: AddrView[];
  routes: RouteView[];
  neigh: NeighView[];
  fdb: FdbView[];
}

/** ifindex → name of the links of one namespace. */
export type LinkNames = Map<number, string>;

/** The names of `links` by ifindex. */
export function linkNames(links: LinkInfo[]): LinkNames {
  return new Map(links.map((l) => [l.index, l.name]));
}

/** The view of a link. */
export function linkView(l: LinkInfo, names: LinkNames): LinkView {
  const v: LinkView = {
    name: l.name,
    ifindex: l.index,
    kind: l.kind,
    flags: [...l.flags],
    up: l.up,
    operstate: l.operstate,
    mtu: l.mtu,
    mac: l.mac,
    master: l.master === null ? null : names.get(l.master) ?? null,
    masterIfindex: l.master,
    parent: l.parent === null || l.linkNetnsId !== null ? null : names.get(l.parent) ?? null,
    parentIfindex: l.parent,
    linkNetnsId: l.linkNetnsId,
  };
  if (l.vxlan) {
    const x = l.vxlan;
    v.vxlan = {
      vni: x.vni,
      port: x.port,
      local: x.local,
      dev: x.dev === null ? null : names.get(x.dev) ?? null,
      devIfindex: x.dev,
      learning: x.learning,
      gbp: x.gbp,
    };
  }
  if (l.bridgePort) v.bridgePort = { hairpin: l.bridgePort.hairpin };
  return v;
}

/** The view of an address. */
export function addrView(a: AddrInfo): AddrView {
  return {
    dev: a.ifname,
    ifindex: a.index,
    family: a.family,
    local: a.local,
    prefix: a.prefix,
    scope: a.scope,
  };
}

/** The view of a route; `names` resolves a next hop's device when the kernel layer gave only its index. */
export function routeView(r: RouteInfo, names: LinkNames): RouteView {
  return {
    family: r.family,
    dst: r.dst,
    gateway: r.gateway,
    dev: r.devName ?? (r.dev === null ? null : names.get(r.dev) ?? null),
    ifindex: r.dev,
    scope: r.scope,
    flags: [...r.flags],
    table: r.table,
    protocol: r.protocol,
    type: r.type,
    prefsrc: r.prefsrc,
    metric: r.metric,
  };
}

/** flannel's VXLAN devices: `flannel.<VNI>` and, with IPv6, `flannel-v6.<VNI>`. */
const FLANNEL_VXLAN = /^flannel(-v6)?\.\d+$/;

/**
 * Which remote subnet a flannel.* / flannel-v6.* ARP or NDP entry serves: the subnet routed via that IP on
 * the same device (flannel's VXLAN triplet: route SUBNET via GW onlink, ARP/NDP GW → VTEP MAC, FDB VTEP
 * MAC → node IP or IPv6).
 */
export function neighSubnet(n: { ifname: string; dst: string }, routes: RouteInfo[]): string | null {
  if (!FLANNEL_VXLAN.test(n.ifname)) return null;
  return routes.find((r) => r.devName === n.ifname && r.gateway === n.dst)?.dst ?? null;
}

/** Which remote subnet a flannel.* FDB entry serves (through the ARP entry with the same MAC). */
export function fdbSubnet(f: FdbInfo, neigh: NeighInfo[], routes: RouteInfo[]): string | null {
  if (!FLANNEL_VXLAN.test(f.ifname)) return null;
  const n = neigh.find((n) => n.ifname === f.ifname && n.lladdr === f.mac);
  return n ? neighSubnet(n, routes) : null;
}

/** The view of a neighbour entry. */
export function neighView(n: NeighInfo, routes: RouteInfo[]): NeighView {
  return {
    family: n.family,
    dev: n.ifname,
    ifindex: n.index,
    dst: n.dst,
    lladdr: n.lladdr,
    state: [...n.state],
    subnet: neighSubnet(n, routes),
  };
}

/** The view of an FDB entry. */
export function fdbView(f: FdbInfo, names: LinkNames, neigh: NeighInfo[], routes: RouteInfo[]): FdbView {
  return {
    dev: f.ifname,
    ifindex: f.index,
    mac: f.mac,
    dst: f.dst,
    master: f.master === null ? null : names.get(f.master) ?? null,
    masterIfindex: f.master,
    flags: [...f.flags],
    state: [...f.state],
    vlan: f.vlan,
    subnet: fdbSubnet(f, neigh, routes),
  };
}

/** The view of a veth pair. */
export function vethView(p: VethPair): VethView {
  return {
    name: p.name,
    ifindex: p.ifindex,
    netns: p.netns,
    peer: { name: p.peer.name, ifindex: p.peer.ifindex, netns: p.peer.netns },
  };
}

function ipOrder(a: string, b: string): number {
  const x = IPAddr.tryParse(a), y = IPAddr.tryParse(b);
  if (x && y) return x.family - y.family || x.compare(y);
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Neighbours sorted by device, family, then address (numerically). */
export function sortNeigh(ns: NeighView[]): NeighView[] {
  return [...ns].sort((a, b) => a.dev.localeCompare(b.dev) || a.family - b.family || ipOrder(a.dst, b.dst));
}

/** FDB entries sorted by device, then MAC, then destination. */
export function sortFdb(fs: FdbView[]): FdbView[] {
  return [...fs].sort((a, b) =>
    a.dev.localeCompare(b.dev) || a.mac.localeCompare(b.mac) || ipOrder(a.dst ?? "", b.dst ?? "")
  );
}

/** Whether an entry on `dev` is flannel's (the default view of `inspect neigh` and `inspect fdb`). */
export function isFlannelDev(dev: string | null): boolean {
  return dev !== null && (dev.startsWith("flannel.") || dev.startsWith("flannel-v6."));
}
