/**
 * An in-memory {@link NetlinkHandle} for unit tests of the reconciler, the backends and interface
 * selection: routes, neighbours, FDB entries, links and addresses in plain arrays, every write recorded
 * in `ops`, and optional injected failures. Not a kernel: only what those modules use is modelled.
 * @module
 */
import type {
  AddrInfo,
  FdbInfo,
  LinkInfo,
  LinkRef,
  NeighInfo,
  NetlinkHandle,
  RouteInfo,
  RouteSpec,
  VxlanCreateOptions,
} from "../types.ts";

/** A fake kernel. */
export class FakeNetlink implements NetlinkHandle {
  readonly netns = null;
  linkList: LinkInfo[] = [];
  addrList: AddrInfo[] = [];
  routeList: RouteInfo[] = [];
  neighList: NeighInfo[] = [];
  fdbList: FdbInfo[] = [];
  /** Every write, e.g. "replaceRoute 10.244.2.0/24". */
  ops: string[] = [];
  /** Throws on the write whose op text starts with one of these. */
  failOn: string[] = [];
  /** Compact scans (scanRoutes/scanNeighbours/scanFdb), present after {@link enableScans}. */
  scanRoutes?: NetlinkHandle["scanRoutes"];
  scanNeighbours?: NetlinkHandle["scanNeighbours"];
  scanFdb?: NetlinkHandle["scanFdb"];
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
  replaceRoute(r: RouteSpec): void {
    this.#op(`replaceRoute ${r.dst}`);
    this.routeList = this.routeList.filter((x) => !(x.dst === r.dst && x.table === (r.table ?? 254)));
    const dev = r.dev === undefined ? null : this.#index(r.dev);
    this.routeList.push(
      fakeRoute(r.dst, r.via ?? null, dev, r.dev === undefined ? null : this.#name(r.dev), r.onlink),
    );
  }
  deleteRoute(r: RouteSpec): void {
    this.#op(`deleteRoute ${r.dst}`);
    const before = this.routeList.length;
    this.routeList = this.routeList.filter((x) => x.dst !== r.dst);
    if (before === this.routeList.length) throw new Error("No such process");
  }
  replaceNeigh(n: { dev: LinkRef; dst: string; lladdr: string }): void {
    this.#op(`replaceNeigh ${n.dst}`);
    const name = this.#name(n.dev);
    this.neighList = this.neighList.filter((x) => !(x.ifname === name && x.dst === n.dst));
    this.neighList.push({
      family: 4,
      index: this.#index(n.dev),
      ifname: name,
      dst: n.dst,
      lladdr: n.lladdr,
      state: ["PERMANENT"],
    });
  }
  deleteNeigh(n: { dev: LinkRef; dst: string }): void {
    this.#op(`deleteNeigh ${n.dst}`);
    this.neighList = this.neighList.filter((x) => !(x.ifname === this.#name(n.dev) && x.dst === n.dst));
  }
  replaceFdb(f: { dev: LinkRef; mac: string; dst: string }): void {
    this.#op(`replaceFdb ${f.mac}`);
    const name = this.#name(f.dev);
    this.fdbList = this.fdbList.filter((x) => !(x.ifname === name && x.mac === f.mac && x.dst === f.dst));
    this.fdbList.push({
      index: this.#index(f.dev),
      ifname: name,
      mac: f.mac,
      dst: f.dst,
      master: null,
      flags: ["self"],
      state: ["PERMANENT"],
      vlan: null,
    });
  }
  deleteFdb(f: { dev: LinkRef; mac: string; dst?: string }): void {
    this.#op(`deleteFdb ${f.mac}`);
    const name = this.#name(f.dev);
    this.fdbList = this.fdbList.filter((x) =>
      !(x.ifname === name && x.mac === f.mac && (!f.dst || x.dst === f.dst))
    );
  }
  /** Adds the compact scans, answered from the same arrays (as the libnl handle's are from the kernel). */
  enableScans(): this {
    const protocols: Record<string, number> = { kernel: 2, boot: 3, static: 4 };
    this.scanRoutes = (opts, each) => {
      for (const r of this.routeList) {
        if (opts.family && r.family !== opts.family) continue;
        if (opts.table !== undefined && r.table !== opts.table) continue;
        each({
          family: r.family,
          dst: r.dst,
          gateway: r.gateway,
          dev: r.dev,
          onlink: r.flags.includes("onlink"),
          table: r.table,
          protocol: protocols[r.protocol] ?? Number(r.protocol),
          type: r.type === "unicast" ? 1 : 0,
          metric: r.metric,
        });
      }
    };
    const nud: Record<string, number> = { PERMANENT: 0x80, NOARP: 0x40, REACHABLE: 0x02, STALE: 0x04 };
    this.scanNeighbours = (opts, each) => {
      const idx = this.#index(opts.dev);
      if (idx < 0) throw new Error(`Cannot find device "${opts.dev}"`);
      for (const n of this.neighList) {
        if (n.index !== idx || (opts.family && n.family !== opts.family)) continue;
        const state = n.state.reduce((s, x) => s | (nud[x] ?? 0), 0);
        each({
          family: n.family,
          index: n.index,
          dst: n.dst,
          lladdr: n.lladdr?.toLowerCase() ?? null,
          state,
        });
      }
    };
    this.scanFdb = (dev, each) => {
      const idx = this.#index(dev);
      if (idx < 0) throw new Error(`Cannot find device "${dev}"`);
      for (const f of this.fdbList) {
        if (f.index === idx) each({ index: f.index, mac: f.mac.toLowerCase(), dst: f.dst });
      }
    };
    return this;
  }

  txChecksum(name: string): boolean {
    if (!this.linkList.some((l) => l.name === name)) throw new Error(`ethtool -k ${name}: No such device`);
    return this.txCsum.get(name) ?? false;
  }
  setTxChecksum(name: string, on: boolean): void {
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
    table: 254,
    protocol: "boot",
    type: "unicast",
    prefsrc: null,
    metric: null,
    ...extra,
  };
}
