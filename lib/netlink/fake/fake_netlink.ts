/**
 * An in-memory {@link NetlinkHandle} for unit tests of the reconciler, the backends and interface
 * selection: routes, neighbours, FDB entries, links and addresses in plain arrays, every write recorded
 * in `ops`, and optional injected failures. Not a kernel, but where those modules rely on the kernel's
 * answer it gives the same one, as the libnl handle's NetlinkError named by the same operation:
 *
 * - route, neighbour and FDB writes on an unknown device: `Cannot find device "NAME"`;
 * - `route replace` replaces the route of the same dst, table and metric, else adds one; a gateway without
 *   `onlink` must lie in a connected route of the device (else ENETUNREACH, "Nexthop has invalid gateway");
 * - `route del` removes the first route matching dst and table and, where given, gateway, device and
 *   metric (else ESRCH); `neigh del` of a missing entry is ENOENT;
 * - a VXLAN FDB entry of a unicast MAC has one remote: `fdb replace` moves it, `fdb del MAC dst IP` is
 *   ENOENT for an unknown MAC and succeeds without a change when the MAC points elsewhere;
 * - `writeMany` applies its writes in order, one error slot per write, a failure never stopping the rest;
 * - the compact scans filter as the kernel's strict dumps do and hand out one reused entry per scan;
 * - `createWireguard` makes a link of kind "wireguard" when `kinds` has it, else refuses as a kernel
 *   without the module does (EOPNOTSUPP, "Unknown device type"); a name in use is EEXIST.
 *
 * Product code never imports this folder (`deno task boundaries`).
 * @module
 */
import type {
  AddrInfo,
  FdbDelSpec,
  FdbInfo,
  FdbScanEntry,
  FdbSpec,
  LinkInfo,
  LinkRef,
  NeighInfo,
  NeighScanEntry,
  NeighSpec,
  NetlinkHandle,
  NetlinkWrite,
  RouteDelSpec,
  RouteInfo,
  RouteScanEntry,
  RouteSpec,
  VxlanCreateOptions,
} from "../types.ts";
import { errnoText, errnoToNle, NetlinkError, NLE } from "../../sys/errors.ts";
import { fdbOp, neighOp, routeOp } from "../codec/encode.ts";
import { nudNames, protocolValue, routeTypeName } from "../codec/format.ts";
import {
  EEXIST,
  ENETUNREACH,
  ENODEV,
  ENOENT,
  EOPNOTSUPP,
  ESRCH,
  RT_TABLE_LOCAL,
  RT_TABLE_MAIN,
} from "../codec/consts.ts";
import { IPAddr, IPNet } from "../../base/cidr.ts";

/** The kernel's refusal of `op` with `errno` (and its extended-ack text), as the libnl handle reports it. */
function refused(op: string, errno: number, extack: string | null = null): NetlinkError {
  return new NetlinkError(op, errnoToNle(errno), errnoText(errno), errnoText(errno), {
    errno,
    message: extack,
  });
}

/** RTN_* by name and NUD_* bit by name, the inverse of the codec's tables. */
const RTN = new Map(Array.from({ length: 12 }, (_, t) => [routeTypeName(t), t]));
const NUD = new Map(Array.from({ length: 8 }, (_, i) => [nudNames(1 << i)[0], 1 << i]));
const NUD_OF_STATE = { permanent: "PERMANENT", reachable: "REACHABLE", noarp: "NOARP" } as const;

/** True for a multicast or all-zero MAC (the VXLAN FDB keeps several remotes only for those). */
function groupMac(mac: string): boolean {
  return (parseInt(mac.slice(0, 2), 16) & 1) === 1 || /^(00:){5}00$/.test(mac);
}

/** A fake kernel. */
export class FakeNetlink implements NetlinkHandle {
  readonly netns = null;
  linkList: LinkInfo[] = [];
  addrList: AddrInfo[] = [];
  routeList: RouteInfo[] = [];
  neighList: NeighInfo[] = [];
  fdbList: FdbInfo[] = [];
  /** Every write the fake kernel took up (refused ones too; not injected failures), e.g. "replaceRoute 10.244.2.0/24". */
  ops: string[] = [];
  /** The size of each {@link writeMany} call, in order. */
  batches: number[] = [];
  /** Throws on the write whose op text starts with one of these. */
  failOn: string[] = [];
  /** Link kinds the fake kernel can create with createWireguard (delete "wireguard": no module). */
  kinds = new Set(["wireguard"]);
  /** TX checksum offload per device name (unset: off). */
  txCsum = new Map<string, boolean>();
  #next = 10;

  #op(s: string): void {
    if (this.failOn.some((f) => s.startsWith(f))) throw new Error(`injected failure: ${s}`);
    this.ops.push(s);
  }

  #name(ref: LinkRef): string {
    return typeof ref === "string" ? ref : (this.linkList.find((l) => l.index === ref)?.name ?? String(ref));
  }

  #index(ref: LinkRef): number {
    return typeof ref === "number" ? ref : (this.linkList.find((l) => l.name === ref)?.index ?? -1);
  }

  /** The link `ref` names, or the libnl handle's error for an unknown one (named `op`). */
  #dev(ref: LinkRef, op: string): LinkInfo {
    const l = this.linkList.find((x) => (typeof ref === "number" ? x.index === ref : x.name === ref));
    if (l) return l;
    if (typeof ref === "number") throw refused(op, ENODEV);
    throw new NetlinkError(op, -NLE.NODEV, "No such device", `Cannot find device "${ref}"`);
  }

  /** Adds a link (returns it). */
  addLink(name: string, extra: Partial<LinkInfo> = {}): LinkInfo {
    const l: LinkInfo = {
      index: this.#next++,
      name,
      kind: null,
      flags: ["UP"],
      up: true,
      operstate: "UP",
      mtu: 1500,
      mac: "02:00:00:00:00:01",
      master: null,
      parent: null,
      linkNetnsId: null,
      ...extra,
    };
    this.linkList.push(l);
    return l;
  }

  links(): LinkInfo[] {
    return this.linkList.map((l) => ({ ...l }));
  }
  link(ref: LinkRef): LinkInfo | null {
    const l = this.linkList.find((x) => (typeof ref === "number" ? x.index === ref : x.name === ref));
    return l ? { ...l } : null;
  }
  addrs(family?: 4 | 6): AddrInfo[] {
    return this.addrList.filter((a) => !family || a.family === family);
  }
  routes(_opts?: { family?: 4 | 6; table?: number }): RouteInfo[] {
    return this.routeList.map((r) => ({ ...r }));
  }
  neighbours(_family?: 4 | 6): NeighInfo[] {
    return this.neighList.map((n) => ({ ...n }));
  }
  fdb(): FdbInfo[] {
    return this.fdbList.map((f) => ({ ...f }));
  }
  createBridge(name: string): void {
    this.#op(`createBridge ${name}`);
    this.addLink(name, { kind: "bridge" });
  }
  createVxlan(
    name: string,
    o: VxlanCreateOptions,
  ): void {
    this.#op(`createVxlan ${name}`);
    this.addLink(name, {
      kind: "vxlan",
      up: false,
      flags: [],
      mtu: o.mtu ?? 1500,
      mac: o.mac ?? "02:00:00:00:00:02",
      vxlan: {
        vni: o.vni,
        port: o.port || 8472,
        local: o.local ?? null,
        dev: o.dev === undefined ? null : this.#index(o.dev),
        learning: o.learning ?? true,
        gbp: o.gbp ?? false,
      },
    });
  }
  createVeth(name: string, peer: string): void {
    this.#op(`createVeth ${name} ${peer}`);
  }
  createWireguard(name: string, o: { mtu?: number } = {}): void {
    const op = `link add ${name} type wireguard`;
    this.#op(`createWireguard ${name}`);
    if (!this.kinds.has("wireguard")) throw refused(op, EOPNOTSUPP, "Unknown device type");
    if (this.linkList.some((l) => l.name === name)) throw refused(op, EEXIST);
    this.addLink(name, { kind: "wireguard", up: false, flags: ["NOARP"], mtu: o.mtu ?? 1420, mac: null });
  }
  createDummy(name: string): void {
    this.#op(`createDummy ${name}`);
    this.addLink(name, { kind: "dummy" });
  }
  setUp(ref: LinkRef, up: boolean): void {
    this.#op(`setUp ${this.#name(ref)} ${up}`);
    const l = this.linkList.find((x) => x.name === this.#name(ref));
    if (l) l.up = up;
  }
  setMtu(ref: LinkRef, mtu: number): void {
    this.#op(`setMtu ${this.#name(ref)} ${mtu}`);
    const l = this.linkList.find((x) => x.name === this.#name(ref));
    if (l) l.mtu = mtu;
  }
  setMac(ref: LinkRef, mac: string): void {
    this.#op(`setMac ${this.#name(ref)} ${mac}`);
    const l = this.linkList.find((x) => x.name === this.#name(ref));
    if (l) l.mac = mac;
  }
  setMaster(): void {}
  setHairpin(): void {}
  moveToNetns(): void {}
  deleteLink(ref: LinkRef): void {
    const name = this.#name(ref);
    this.#op(`deleteLink ${name}`);
    const idx = this.#index(ref);
    this.linkList = this.linkList.filter((l) => l.name !== name);
    this.addrList = this.addrList.filter((a) => a.index !== idx);
    this.routeList = this.routeList.filter((r) => r.dev !== idx);
    this.neighList = this.neighList.filter((n) => n.index !== idx);
    this.fdbList = this.fdbList.filter((f) => f.index !== idx);
  }
  addAddr(ref: LinkRef, cidr: string): void {
    this.#op(`addAddr ${this.#name(ref)} ${cidr}`);
    const [local, p] = cidr.split("/");
    this.addrList.push({
      index: this.#index(ref),
      ifname: this.#name(ref),
      family: local.includes(":") ? 6 : 4,
      local,
      prefix: Number(p),
      scope: "global",
    });
  }
  delAddr(ref: LinkRef, cidr: string): void {
    this.#op(`delAddr ${this.#name(ref)} ${cidr}`);
    this.addrList = this.addrList.filter((a) =>
      !(a.ifname === this.#name(ref) && `${a.local}/${a.prefix}` === cidr)
    );
  }

  /** True when `via` lies in a connected (gateway-less) unicast route of device `dev` (any device: null). */
  #connected(via: string, dev: number | null): boolean {
    const ip = IPAddr.tryParse(via);
    return !!ip &&
      this.routeList.some((r) =>
        r.gateway === null && r.type === "unicast" && (dev === null || r.dev === dev) &&
        (r.dst === "default" ? r.family === ip.family : IPNet.tryParse(r.dst)?.contains(ip) === true)
      );
  }

  replaceRoute(r: RouteSpec): void {
    const op = routeOp("replace", r);
    const dev = r.dev === undefined ? null : this.#dev(r.dev, op);
    this.#op(`replaceRoute ${r.dst}`);
    if (r.via && !r.onlink && !this.#connected(r.via, dev?.index ?? null)) {
      throw refused(op, ENETUNREACH, "Nexthop has invalid gateway");
    }
    const table = r.table ?? RT_TABLE_MAIN, metric = r.metric ?? 0;
    const route = fakeRoute(r.dst, r.via ?? null, dev?.index ?? null, dev?.name ?? null, r.onlink, {
      family: r.dst.includes(":") ? 6 : 4,
      table,
      metric: r.metric ?? null,
    });
    const at = this.routeList.findIndex((x) =>
      x.dst === r.dst && x.table === table && (x.metric ?? 0) === metric
    );
    if (at < 0) this.routeList.push(route);
    else this.routeList[at] = route;
  }
  deleteRoute(r: RouteDelSpec): void {
    const op = routeOp("del", r);
    const dev = r.dev === undefined ? null : this.#dev(r.dev, op);
    this.#op(`deleteRoute ${r.dst}`);
    const table = r.table ?? RT_TABLE_MAIN;
    const at = this.routeList.findIndex((x) =>
      x.dst === r.dst && x.table === table && (!r.via || x.gateway === r.via) &&
      (!dev || x.dev === dev.index) &&
      (!r.metric || x.metric === r.metric)
    );
    if (at < 0) throw refused(op, ESRCH);
    this.routeList.splice(at, 1);
  }
  replaceNeigh(n: NeighSpec): void {
    const dev = this.#dev(n.dev, neighOp("replace", n));
    this.#op(`replaceNeigh ${n.dst}`);
    const entry: NeighInfo = {
      family: n.dst.includes(":") ? 6 : 4,
      index: dev.index,
      ifname: dev.name,
      dst: n.dst,
      lladdr: n.lladdr,
      state: [NUD_OF_STATE[n.state ?? "permanent"]],
    };
    const at = this.neighList.findIndex((x) => x.index === dev.index && x.dst === n.dst);
    if (at < 0) this.neighList.push(entry);
    else this.neighList[at] = entry;
  }
  deleteNeigh(n: { dev: LinkRef; dst: string }): void {
    const op = neighOp("del", n);
    const dev = this.#dev(n.dev, op);
    this.#op(`deleteNeigh ${n.dst}`);
    const at = this.neighList.findIndex((x) => x.index === dev.index && x.dst === n.dst);
    if (at < 0) throw refused(op, ENOENT);
    this.neighList.splice(at, 1);
  }
  replaceFdb(f: FdbSpec): void {
    const dev = this.#dev(f.dev, fdbOp("replace", f));
    this.#op(`replaceFdb ${f.mac}`);
    const mac = f.mac.toLowerCase();
    const mine = (x: FdbInfo) => x.index === dev.index && x.mac.toLowerCase() === mac;
    if (this.fdbList.some((x) => mine(x) && x.dst === f.dst)) return;
    const at = groupMac(mac) ? -1 : this.fdbList.findIndex(mine);
    if (at >= 0) {
      this.fdbList[at] = { ...this.fdbList[at], dst: f.dst };
      return;
    }
    this.fdbList.push({
      index: dev.index,
      ifname: dev.name,
      mac: f.mac,
      dst: f.dst,
      master: null,
      flags: ["self"],
      state: ["PERMANENT"],
      vlan: null,
    });
  }
  deleteFdb(f: FdbDelSpec): void {
    const op = fdbOp("del", f);
    const dev = this.#dev(f.dev, op);
    this.#op(`deleteFdb ${f.mac}`);
    const mac = f.mac.toLowerCase();
    const mine = (x: FdbInfo) => x.index === dev.index && x.mac.toLowerCase() === mac;
    if (!this.fdbList.some(mine)) throw refused(op, ENOENT);
    this.fdbList = this.fdbList.filter((x) => !(mine(x) && (!f.dst || x.dst === f.dst)));
  }

  writeMany(writes: readonly NetlinkWrite[]): (Error | null)[] {
    this.batches.push(writes.length);
    return writes.map((w) => {
      try {
        this.#write(w);
        return null;
      } catch (e) {
        return e instanceof Error ? e : new Error(String(e));
      }
    });
  }

  #write(w: NetlinkWrite): void {
    switch (w.op) {
      case "replaceRoute":
        return this.replaceRoute(w.route);
      case "deleteRoute":
        return this.deleteRoute(w.route);
      case "replaceNeigh":
        return this.replaceNeigh(w.neigh);
      case "deleteNeigh":
        return this.deleteNeigh(w.neigh);
      case "replaceFdb":
        return this.replaceFdb(w.fdb);
      case "deleteFdb":
        return this.deleteFdb(w.fdb);
    }
  }

  scanRoutes(
    opts: { family?: 4 | 6; table?: number; dev?: LinkRef },
    each: (r: Readonly<RouteScanEntry>) => void,
  ): void {
    const idx = opts.dev === undefined ? null : this.#scanIndex(opts.dev, "route show");
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
    for (const r of this.routeList) {
      if (opts.family && r.family !== opts.family) continue;
      if (opts.table !== undefined ? r.table !== opts.table : r.table === RT_TABLE_LOCAL) continue;
      if (idx !== null && r.dev !== idx) continue;
      e.family = r.family, e.dst = r.dst, e.gateway = r.gateway, e.dev = r.dev;
      e.onlink = r.flags.includes("onlink"),
        e.table = r.table,
        e.protocol = protocolValue(r.protocol, "protocol");
      e.type = RTN.get(r.type) ?? Number(r.type), e.metric = r.metric || null;
      each(e);
    }
  }

  scanNeighbours(opts: { family?: 4 | 6; dev: LinkRef }, each: (n: Readonly<NeighScanEntry>) => void): void {
    const index = this.#scanIndex(opts.dev, `neigh show dev ${opts.dev}`);
    const e: NeighScanEntry = { family: 4, index, dst: "", lladdr: null, state: 0 };
    for (const n of this.neighList) {
      if (n.index !== index || (opts.family && n.family !== opts.family)) continue;
      e.family = n.family, e.dst = n.dst, e.lladdr = n.lladdr?.toLowerCase() ?? null;
      e.state = n.state.reduce((s, x) => s | (NUD.get(x) ?? 0), 0);
      each(e);
    }
  }

  scanFdb(dev: LinkRef, each: (f: Readonly<FdbScanEntry>) => void): void {
    const index = this.#scanIndex(dev, `fdb show dev ${dev}`);
    const e: FdbScanEntry = { index, mac: "", dst: null };
    for (const f of this.fdbList) {
      if (f.index !== index) continue;
      e.mac = f.mac.toLowerCase(), e.dst = f.dst;
      each(e);
    }
  }

  /** A scan's device: a name must exist (as the libnl handle looks it up); an ifindex is used as given. */
  #scanIndex(ref: LinkRef, op: string): number {
    return typeof ref === "number" ? ref : this.#dev(ref, op).index;
  }

  txChecksum(name: string): boolean {
    if (!this.link(name)) throw refused(`ethtool -k ${name}`, ENODEV); // the ioctl's errno, not libnl's
    return this.txCsum.get(name) ?? false;
  }
  setTxChecksum(name: string, on: boolean): void {
    if (!this.link(name)) throw refused(`ethtool -K ${name} tx ${on ? "on" : "off"}`, ENODEV);
    this.#op(`setTxChecksum ${name} ${on}`);
    this.txCsum.set(name, on);
  }
  close(): void {}
}

/** A main-table IPv4 route as the kernel layer reports it. */
export function fakeRoute(
  dst: string,
  gateway: string | null,
  dev: number | null,
  devName: string | null,
  onlink = false,
  extra: Partial<RouteInfo> = {},
): RouteInfo {
  return {
    family: 4,
    dst,
    gateway,
    dev,
    devName,
    scope: gateway ? "universe" : "link",
    flags: onlink ? ["onlink"] : [],
    table: RT_TABLE_MAIN,
    protocol: "boot",
    type: "unicast",
    prefsrc: null,
    metric: null,
    ...extra,
  };
}
