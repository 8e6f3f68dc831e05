/**
 * `flanctl inspect [links|veths|addrs|routes|neigh|fdb|all] [--netns NAME] [-o table|json]`: the kernel's
 * network state as the kernel layer reads it, in aligned tables or JSON. libnl is imported inside the
 * action, so `flanctl inspect --help` works without it.
 * @module
 */
import type { Command } from "commander";
import { UsageError } from "../lib/errors.ts";
import type { AddrInfo, FdbInfo, LinkInfo, NeighInfo, NetnsRef, RouteInfo } from "../lib/netlink/types.ts";
import type { VethPair } from "../lib/kernel/veths.ts";

/** What `inspect` can show. */
export const INSPECT_KINDS = ["links", "veths", "addrs", "routes", "neigh", "fdb", "all"] as const;
/** One of {@link INSPECT_KINDS}. */
export type InspectKind = typeof INSPECT_KINDS[number];

/** Everything `inspect all -o json` prints. */
export interface InspectAll {
  links: LinkInfo[];
  veths: VethPair[];
  addrs: AddrInfo[];
  routes: RouteInfo[];
  neigh: NeighInfo[];
  fdb: FdbInfo[];
}

/** Options of `flanctl inspect`. */
export interface InspectOptions {
  netns?: string;
  output?: string;
}

/** `--netns` value to a reference: a name, an absolute nsfs path, or `pid:PID`. */
export function parseNetnsArg(v: string): NetnsRef {
  if (v.startsWith("/")) return { path: v };
  const m = /^pid:(\d+)$/.exec(v);
  if (m) return { pid: Number(m[1]) };
  if (v === "" || v.includes("/") || v === "." || v === "..") {
    throw new UsageError(`--netns: '${v}' is not a namespace name (see 'ip netns list'), path or pid:PID`);
  }
  return { name: v };
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

/**
 * Which remote subnet a flannel.* ARP entry serves: the subnet routed via that IP on the same device
 * (flannel's VXLAN triplet: route SUBNET via GW onlink, ARP GW → VTEP MAC, FDB VTEP MAC → node IP).
 */
export function neighSubnet(n: { ifname: string; dst: string }, routes: RouteInfo[]): string | null {
  if (!n.ifname.startsWith("flannel.")) return null;
  return routes.find((r) => r.devName === n.ifname && r.gateway === n.dst)?.dst ?? null;
}

/** Which remote subnet a flannel.* FDB entry serves (through the ARP entry with the same MAC). */
export function fdbSubnet(f: FdbInfo, neigh: NeighInfo[], routes: RouteInfo[]): string | null {
  if (!f.ifname.startsWith("flannel.")) return null;
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

function output(v: unknown): "table" | "json" {
  if (v === undefined || v === "table") return "table";
  if (v === "json") return "json";
  throw new UsageError(`-o/--output: '${v}' is not one of table, json`);
}

function kind(v: unknown): InspectKind {
  if (v === undefined) return "all";
  if ((INSPECT_KINDS as readonly string[]).includes(String(v))) return v as InspectKind;
  throw new UsageError(`inspect: '${v}' is not one of ${INSPECT_KINDS.join(", ")}`);
}

/** Runs `flanctl inspect` and returns the text to print. */
export async function runInspect(what: string | undefined, opts: InspectOptions): Promise<string> {
  const k = kind(what);
  const out = output(opts.output);
  const ref = opts.netns !== undefined ? parseNetnsArg(opts.netns) : null;
  const { openNetlink } = await import("../lib/netlink/mod.ts");
  const veths = async () => {
    const { listVethPairs } = await import("../lib/kernel/veths.ts");
    const label = ref === null
      ? undefined
      : "name" in ref
      ? ref.name
      : "pid" in ref
      ? `pid:${ref.pid}`
      : undefined;
    if (ref !== null && label === undefined) {
      throw new UsageError("--netns: inspect veths takes a namespace name or pid:PID, not a path");
    }
    return listVethPairs(label === undefined ? {} : { netns: label });
  };
  if (k === "veths") {
    const v = await veths();
    return out === "json" ? JSON.stringify(v, null, 2) : vethsTable(v);
  }
  const h = openNetlink(ref);
  try {
    switch (k) {
      case "links": {
        const l = h.links();
        return out === "json" ? JSON.stringify(l, null, 2) : linksTable(l);
      }
      case "addrs": {
        const a = h.addrs();
        return out === "json" ? JSON.stringify(a, null, 2) : addrsTable(a);
      }
      case "routes": {
        const r = h.routes();
        return out === "json" ? JSON.stringify(r, null, 2) : routesTable(r);
      }
      case "neigh": {
        const n = h.neighbours();
        return out === "json" ? JSON.stringify(n, null, 2) : neighTable(n, h.routes());
      }
      case "fdb": {
        const f = h.fdb();
        if (out === "json") return JSON.stringify(f, null, 2);
        const names = new Map(h.links().map((l) => [l.index, l.name]));
        return fdbTable(f, names, h.neighbours(), h.routes());
      }
      default: {
        const all: InspectAll = {
          links: h.links(),
          veths: await veths(),
          addrs: h.addrs(),
          routes: h.routes(),
          neigh: h.neighbours(),
          fdb: h.fdb(),
        };
        if (out === "json") return JSON.stringify(all, null, 2);
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
    }
  } finally {
    h.close();
  }
}

/** Registers `inspect` on the command tree. */
export function register(program: Command): void {
  program
    .command("inspect")
    .description(
      "show links, veth pairs, addresses, routes, neighbours and FDB entries as the kernel has them",
    )
    .argument("[what]", `one of ${INSPECT_KINDS.join(", ")}`, "all")
    .option("--netns <name>", "network namespace to read (name, /path, or pid:PID); default: this one")
    .option("-o, --output <format>", "table or json", "table")
    .addHelpText(
      "after",
      "\n`inspect veths` pairs veths across every namespace on the host; with --netns, the pairs with an end" +
        " there.\nJSON: links/addrs/routes/neigh/fdb are lists of the objects in lib/netlink/types.ts; veths is" +
        ' a list of {"name","ifindex","netns","peer":{"name","ifindex","netns"}} (netns null = this one).',
    )
    .action(async (what: string | undefined, opts: InspectOptions) => {
      const text = await runInspect(what, opts);
      console.log(text);
    });
}
