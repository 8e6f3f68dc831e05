/**
 * Text rendering of `flanctl inspect`: the kernel layer's links, veth pairs, addresses, routes, neighbours
 * and FDB entries as aligned tables (flannel.* neighbours and FDB entries annotated with the subnet they
 * serve). Pure functions of the values read; no kernel access.
 * @module
 */
import type { AddrInfo, FdbInfo, LinkInfo, NeighInfo, RouteInfo } from "../netlink/types.ts";
import type { VethPair } from "../kernel/veths.ts";

/** Everything `inspect all -o json` prints. */
export interface InspectAll {
  links: LinkInfo[];
  veths: VethPair[];
  addrs: AddrInfo[];
  routes: RouteInfo[];
  neigh: NeighInfo[];
  fdb: FdbInfo[];
}

/** Lays out rows as columns separated by two spaces (last column not padded). */
export function table(head: string[], rows: string[][]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [head, ...rows].map((r) =>
    r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(w[i]))).join("  ").trimEnd()
  )
    .join("\n");
}

const dash = (
  v: string | number | null | undefined,
) => (v === null || v === undefined || v === "" ? "-" : String(v));

function linkDetails(l: LinkInfo, names: Map<number, string>): string {
  const d: string[] = [];
  if (l.vxlan) {
    const v = l.vxlan;
    d.push(`vni ${v.vni}`, `port ${v.port}`);
    if (v.local) d.push(`local ${v.local}`);
    if (v.dev !== null) d.push(`dev ${names.get(v.dev) ?? v.dev}`);
    d.push(v.learning ? "learning" : "nolearning");
    if (v.gbp) d.push("gbp");
  }
  if (l.bridgePort) d.push(`hairpin ${l.bridgePort.hairpin ? "on" : "off"}`);
  if (l.linkNetnsId !== null) d.push(`link-netnsid ${l.linkNetnsId}`);
  return d.join(" ");
}

/** The links table. */
export function linksTable(links: LinkInfo[]): string {
  const names = new Map(links.map((l) => [l.index, l.name]));
  return table(
    ["INDEX", "NAME", "KIND", "STATE", "MTU", "MAC", "MASTER", "PARENT", "FLAGS", "DETAILS"],
    links.map((l) => [
      String(l.index),
      l.name,
      dash(l.kind),
      l.operstate,
      String(l.mtu),
      dash(l.mac),
      l.master === null ? "-" : names.get(l.master) ?? String(l.master),
      l.parent === null
        ? "-"
        : l.linkNetnsId === null
        ? names.get(l.parent) ?? String(l.parent)
        : `if${l.parent}`,
      l.flags.join(","),
      linkDetails(l, names),
    ]),
  );
}

/** The veth pairs table. */
export function vethsTable(pairs: VethPair[]): string {
  return table(
    ["NETNS", "NAME", "IFINDEX", "PEER-NETNS", "PEER", "PEER-IFINDEX"],
    pairs.map((p) => [
      p.netns ?? "(this)",
      p.name,
      String(p.ifindex),
      p.peer.netns ?? "(this)",
      dash(p.peer.name),
      String(p.peer.ifindex),
    ]),
  );
}

/** The addresses table. */
export function addrsTable(addrs: AddrInfo[]): string {
  return table(
    ["DEV", "FAMILY", "ADDRESS", "SCOPE"],
    addrs.map((a) => [a.ifname, `inet${a.family === 6 ? "6" : ""}`, `${a.local}/${a.prefix}`, a.scope]),
  );
}

/** The routes table. */
export function routesTable(routes: RouteInfo[]): string {
  return table(
    ["DST", "VIA", "DEV", "SCOPE", "PROTO", "TABLE", "TYPE", "SRC", "METRIC", "FLAGS"],
    routes.map((r) => [
      r.dst,
      dash(r.gateway),
      dash(r.devName ?? r.dev),
      r.scope,
      r.protocol,
      r.table === 254 ? "main" : String(r.table),
      r.type,
      dash(r.prefsrc),
      dash(r.metric),
      r.flags.join(","),
    ]),
  );
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

/** The neighbours table; with `routes`, flannel.* entries show the subnet they serve. */
export function neighTable(neigh: NeighInfo[], routes: RouteInfo[] = []): string {
  return table(
    ["DST", "LLADDR", "DEV", "STATE", "SUBNET"],
    neigh.map((n) => [n.dst, dash(n.lladdr), n.ifname, n.state.join(","), dash(neighSubnet(n, routes))]),
  );
}

/** The FDB table; with `neigh` and `routes`, flannel.* entries show the subnet they serve. */
export function fdbTable(
  fdb: FdbInfo[],
  links?: Map<number, string>,
  neigh: NeighInfo[] = [],
  routes: RouteInfo[] = [],
): string {
  return table(
    ["MAC", "DEV", "DST", "MASTER", "VLAN", "FLAGS", "STATE", "SUBNET"],
    fdb.map((f) => [
      f.mac,
      f.ifname,
      dash(f.dst),
      f.master === null ? "-" : links?.get(f.master) ?? String(f.master),
      dash(f.vlan),
      f.flags.join(","),
      f.state.join(","),
      dash(fdbSubnet(f, neigh, routes)),
    ]),
  );
}

/** Every table of `inspect all`, titled and separated by blank lines. */
export function allTables(all: InspectAll): string {
  const names = new Map(all.links.map((l) => [l.index, l.name]));
  return [
    `LINKS\n${linksTable(all.links)}`,
    `VETHS\n${vethsTable(all.veths)}`,
    `ADDRESSES\n${addrsTable(all.addrs)}`,
    `ROUTES\n${routesTable(all.routes)}`,
    `NEIGHBOURS\n${neighTable(all.neigh, all.routes)}`,
    `FDB\n${fdbTable(all.fdb, names, all.neigh, all.routes)}`,
  ].join("\n\n");
}
