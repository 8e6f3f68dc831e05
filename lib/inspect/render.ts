/**
 * Text rendering of `flanctl inspect`: the views of lib/inspect/views.ts (links, veth pairs, addresses,
 * routes, neighbours, FDB entries) as aligned tables through the one table renderer (lib/base/ui/table.ts);
 * flannel.* neighbours and FDB entries show the subnet they serve. Pure functions; no kernel access.
 * @module
 */
import { RT_TABLE_MAIN } from "../netlink/mod.ts";
import { cell as dash, renderTable as table } from "../base/ui/table.ts";
import type { AddrView, FdbView, InspectView, LinkView, NeighView, RouteView, VethView } from "./views.ts";

export { fdbSubnet, neighSubnet } from "./views.ts";
/** Everything `inspect all -o json` prints (the views of lib/inspect/views.ts). */
export type InspectAll = InspectView;

function linkDetails(l: LinkView): string {
  const d: string[] = [];
  if (l.vxlan) {
    const v = l.vxlan;
    d.push(`vni ${v.vni}`, `port ${v.port}`);
    if (v.local) d.push(`local ${v.local}`);
    if (v.devIfindex !== null) d.push(`dev ${v.dev ?? v.devIfindex}`);
    d.push(v.learning ? "learning" : "nolearning");
    if (v.gbp) d.push("gbp");
  }
  if (l.bridgePort) d.push(`hairpin ${l.bridgePort.hairpin ? "on" : "off"}`);
  if (l.linkNetnsId !== null) d.push(`link-netnsid ${l.linkNetnsId}`);
  return d.join(" ");
}

/** The links table. */
export function linksTable(links: LinkView[]): string {
  return table(
    ["INDEX", "NAME", "KIND", "STATE", "MTU", "MAC", "MASTER", "PARENT", "FLAGS", "DETAILS"],
    links.map((l) => [
      String(l.ifindex),
      l.name,
      dash(l.kind),
      l.operstate,
      String(l.mtu),
      dash(l.mac),
      l.masterIfindex === null ? "-" : l.master ?? String(l.masterIfindex),
      l.parentIfindex === null
        ? "-"
        : l.linkNetnsId === null
        ? l.parent ?? String(l.parentIfindex)
        : `if${l.parentIfindex}`,
      l.flags.join(","),
      linkDetails(l),
    ]),
  );
}

/** The veth pairs table. */
export function vethsTable(pairs: VethView[]): string {
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
export function addrsTable(addrs: AddrView[]): string {
  return table(
    ["DEV", "FAMILY", "ADDRESS", "SCOPE"],
    addrs.map((a) => [a.dev, `inet${a.family === 6 ? "6" : ""}`, `${a.local}/${a.prefix}`, a.scope]),
  );
}

/** The routes table. */
export function routesTable(routes: RouteView[]): string {
  return table(
    ["DST", "VIA", "DEV", "SCOPE", "PROTO", "TABLE", "TYPE", "SRC", "METRIC", "FLAGS"],
    routes.map((r) => [
      r.dst,
      dash(r.gateway),
      dash(r.dev ?? r.ifindex),
      r.scope,
      r.protocol,
      r.table === RT_TABLE_MAIN ? "main" : String(r.table),
      r.type,
      dash(r.prefsrc),
      dash(r.metric),
      r.flags.join(","),
    ]),
  );
}

/** The neighbours table (flannel.* entries show the subnet they serve). */
export function neighTable(neigh: NeighView[]): string {
  return table(
    ["DST", "LLADDR", "DEV", "STATE", "SUBNET"],
    neigh.map((n) => [n.dst, dash(n.lladdr), n.dev, n.state.join(","), dash(n.subnet)]),
  );
}

/** The FDB table (flannel.* entries show the subnet they serve). */
export function fdbTable(fdb: FdbView[]): string {
  return table(
    ["MAC", "DEV", "DST", "MASTER", "VLAN", "FLAGS", "STATE", "SUBNET"],
    fdb.map((f) => [
      f.mac,
      f.dev,
      dash(f.dst),
      f.masterIfindex === null ? "-" : f.master ?? String(f.masterIfindex),
      dash(f.vlan),
      f.flags.join(","),
      f.state.join(","),
      dash(f.subnet),
    ]),
  );
}

/** Every table of `inspect all`, titled and separated by blank lines. */
export function allTables(all: InspectView): string {
  return [
    `LINKS\n${linksTable(all.links)}`,
    `VETHS\n${vethsTable(all.veths)}`,
    `ADDRESSES\n${addrsTable(all.addrs)}`,
    `ROUTES\n${routesTable(all.routes)}`,
    `NEIGHBOURS\n${neighTable(all.neigh)}`,
    `FDB\n${fdbTable(all.fdb)}`,
  ].join("\n\n");
}
