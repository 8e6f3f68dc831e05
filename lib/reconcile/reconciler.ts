/**
 * Desired-versus-actual reconciler for the per-peer kernel entries (route, permanent ARP entry, FDB entry).
 *
 * Two paths:
 * - {@link Reconciler.setPeer}: a store event for one peer is applied at once, without dumping anything
 *   (add: ARP, FDB, route, undoing what was added when a step fails; remove: route, FDB, ARP).
 * - {@link Reconciler.fullPass}: the periodic resync. Routes, neighbours and FDB entries are dumped ONCE,
 *   compared with the desired state, and only the differences are applied; entries we own that no lease
 *   wants any more are removed. "Ours" means: a route in the main table whose destination lies inside the
 *   cluster Network (not our own subnet, not a kernel route) and that goes via a gateway or the overlay
 *   device; a PERMANENT neighbour or an FDB entry with a remote on the overlay device. Nothing else is
 *   touched, and nothing is ever flushed.
 * @module
 */
import type { NetlinkHandle, NetlinkWrite } from "../netlink/types.ts";
import { NUD_PERMANENT, RT_TABLE_MAIN, RTN_UNICAST, RTPROT_KERNEL } from "../netlink/mod.ts";
import { IPNet } from "../base/cidr.ts";
import { lookupRoute, type UnderlayRoute, v4Cidr } from "../base/route_lookup.ts";
import type { DesiredPeer, DesiredRoute } from "./types.ts";
import { samePeer } from "./types.ts";
import type { Log } from "../base/log.ts";
import { errText } from "../base/errors.ts";

/** Counters the reconciler bumps (the daemon's metrics object satisfies this). */
export interface ReconcileStats {
  reconcileRuns: number;
  reconcileErrors: number;
  repairs: number;
  /** Duration of the last full pass, seconds. */
  observeReconcile(seconds: number): void;
}

/** Options of {@link Reconciler}. */
export interface ReconcilerOptions {
  nl: NetlinkHandle;
  /** The cluster Network: only routes inside it are ever touched. */
  network: IPNet;
  /** The overlay device name (vxlan) or null (host-gw). */
  overlayDev: string | null;
  log: Pick<Log, "info" | "warn" | "debug">;
  stats: ReconcileStats;
}

/** What a full pass changed. */
export interface PassResult {
  /** Entries (re)programmed. */
  programmed: number;
  /** Stale entries removed. */
  removed: number;
  /** Operations that failed. */
  errors: number;
}

/** One route as the reconciler looks at it (a single object reused for every route of a dump). */
interface RouteView {
  dst: string;
  gateway: string | null;
  devName: string | null;
  onlink: boolean;
  /** Installed by the kernel (protocol kernel): never ours. */
  kernel: boolean;
  metric: number;
}

/** A desired peer whose kernel entries differ from the dump, and which of them do. */
interface Repair {
  key: string;
  d: DesiredPeer;
  neighOk: boolean;
  fdbOk: boolean;
  routeOk: boolean;
  /** Our routes to the peer's dst in the dump (route keys). */
  ar: string[] | undefined;
  /**
   * The peer is new to this pass (not desired before it: the first pass after start, or a re-list): its
   * entries are programmed for the first time, not repaired.
   */
  first: boolean;
}

/** An entry we own that no lease wants any more. */
interface Stale {
  write: NetlinkWrite;
  /** "stale route", "stale ARP entry", "stale FDB entry". */
  what: string;
  key: string;
  fields: Record<string, string | null>;
}

/** One object kind's side of a pass: whether a desired peer's entry is right, and our entries nobody wants. */
interface KindDiff {
  ok: (d: DesiredPeer) => boolean;
  stale: Stale[];
}

/** A route's next hop as one compact string ("gateway|dev|onlink"), kept per route during a pass. */
function routeKey(gateway: string | null, devName: string | null, onlink: boolean): string {
  return `${gateway ?? ""}|${devName ?? ""}|${onlink ? 1 : 0}`;
}

/** A dumped route of ours by dst: {@link CANONICAL}, one route key, or several (see `#dumpRoutes`). */
type RouteKeys = typeof CANONICAL | string | string[];
/** The vxlan route form: via the dst's network address, onlink, on the overlay device. */
const CANONICAL = 1;

/** True when `ip` is the network address written in `cidr` ("10.244.2.0" of "10.244.2.0/24"). */
function isNetOf(ip: string, cidr: string): boolean {
  return cidr.length > ip.length && cidr.charCodeAt(ip.length) === 47 && cidr.startsWith(ip);
}

function parseRouteKey(k: string): { gateway: string | null; devName: string | null } {
  const [g, d] = k.split("|");
  return { gateway: g || null, devName: d || null };
}

function maskOf(prefix: number): number {
  return prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
}

/** Keeps the kernel's per-peer entries equal to the desired state. */
export class Reconciler {
  readonly #nl: NetlinkHandle;
  readonly #network: IPNet;
  #overlay: string | null;
  readonly #log: Pick<Log, "info" | "warn" | "debug">;
  readonly #stats: ReconcileStats;
  /** Desired state by peer subnet ("10.244.2.0/24"). */
  readonly #desired = new Map<string, DesiredPeer>();
  /** How many desired peers use each VTEP MAC (so removing one never drops another's FDB entry). */
  readonly #macRefs = new Map<string, number>();
  #ownSubnet: string | null = null;
  #underlay: UnderlayRoute[] = [];
  readonly #netBase: number;
  readonly #netMask: number;
  /** 4 or 6: the family of the Network; an IPv6 reconciler dumps and programs IPv6 entries only. */
  readonly #family: 4 | 6;

  constructor(o: ReconcilerOptions) {
    this.#nl = o.nl;
    this.#network = o.network;
    this.#family = o.network.family;
    this.#netMask = this.#family === 4 ? maskOf(o.network.prefix) : 0;
    this.#netBase = this.#family === 4 ? Number(o.network.ip.value) & this.#netMask : 0;
    this.#overlay = o.overlayDev;
    this.#log = o.log;
    this.#stats = o.stats;
  }

  /** Our own subnet: its route (the CNI bridge's) is never touched. */
  setOwnSubnet(s: IPNet | null): void {
    this.#ownSubnet = s ? s.toString() : null;
  }

  /** Number of peers in the desired state. */
  get size(): number {
    return this.#desired.size;
  }

  /** The desired entries of one peer (for tests and inspection). */
  desired(key: string): DesiredPeer | undefined {
    return this.#desired.get(key);
  }

  /** The underlay route the kernel would use for `ip` (from the last dump), or null. */
  reach = (ip: string): UnderlayRoute | null => lookupRoute(this.#underlay, ip);

  /** True when the route's destination lies inside the Network (and is smaller than it). */
  #inNetwork(dst: string): boolean {
    if (this.#family === 6) {
      const n = dst === "default" ? null : IPNet.tryParse(dst);
      return !!n && n.prefix > this.#network.prefix && this.#network.contains(n);
    }
    const c = dst === "default" ? null : v4Cidr(dst);
    return !!c && c[1] > this.#network.prefix && ((c[0] & this.#netMask) >>> 0) === this.#netBase;
  }

  /** A main-table unicast route of our family (not a kernel one) that we own: see the module doc. */
  #isOurs(r: RouteView): boolean {
    if (r.dst === "default" || r.kernel) return false;
    if (!this.#inNetwork(r.dst) || r.dst === this.#ownSubnet) return false;
    return (this.#overlay !== null && r.devName === this.#overlay) || r.gateway !== null;
  }

  /** An underlay route (outside the Network, not via the overlay), or null. */
  #underlayOf(r: RouteView): UnderlayRoute | null {
    if (this.#overlay !== null && r.devName === this.#overlay) return null;
    if (r.dst !== "default" && this.#family === 6) {
      const n = IPNet.tryParse(r.dst);
      if (!n || this.#network.contains(n)) return null;
    } else if (r.dst !== "default") {
      const c = v4Cidr(r.dst);
      if (!c || ((c[0] & this.#netMask) >>> 0) === this.#netBase && c[1] >= this.#network.prefix) return null;
    }
    const net = r.dst === "default"
      ? IPNet.parse(this.#family === 4 ? "0.0.0.0/0" : "::/0")
      : IPNet.tryParse(r.dst);
    return net ? { net, gateway: r.gateway, devName: r.devName, metric: r.metric } : null;
  }

  /**
   * Every unicast route of our family in the main table, as one reused {@link RouteView}, from the handle's
   * compact scan (kernel-filtered to the main table, no RouteInfo per route: a pass over 5,000 peers then
   * makes a fraction of the garbage). Returns the overlay device's ifindex in the links dump that names the
   * devices (null: no overlay, or no such device).
   */
  #eachRoute(fn: (r: RouteView) => void): number | null {
    const v: RouteView = { dst: "", gateway: null, devName: null, onlink: false, kernel: false, metric: 0 };
    const nl = this.#nl;
    const names = new Map<number, string>();
    let overlayIndex: number | null = null;
    for (const l of nl.links()) {
      names.set(l.index, l.name);
      if (l.name === this.#overlay) overlayIndex = l.index;
    }
    nl.scanRoutes({ family: this.#family, table: RT_TABLE_MAIN }, (r) => {
      if (r.family !== this.#family || r.table !== RT_TABLE_MAIN || r.type !== RTN_UNICAST) return;
      v.dst = r.dst, v.gateway = r.gateway, v.devName = r.dev === null ? null : names.get(r.dev) ?? null;
      v.onlink = r.onlink, v.kernel = r.protocol === RTPROT_KERNEL, v.metric = r.metric ?? 0;
      fn(v);
    });
    return overlayIndex;
  }

  #ref(mac: string, d: number): void {
    const n = (this.#macRefs.get(mac) ?? 0) + d;
    if (n <= 0) this.#macRefs.delete(mac);
    else this.#macRefs.set(mac, n);
  }

  #addRoute(r: DesiredRoute): void {
    this.#nl.replaceRoute({ dst: r.dst, via: r.via, dev: r.dev, onlink: r.onlink || undefined });
  }

  #quiet(what: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.#log.debug(`${what} (already gone?)`, { error: errText(e) });
    }
  }

  /** Programs one peer: ARP, FDB, route; undoes the steps already done when one fails. */
  #program(d: DesiredPeer): void {
    const done: (() => void)[] = [];
    try {
      if (d.neigh && this.#overlay) {
        const n = d.neigh;
        this.#nl.replaceNeigh({ dev: this.#overlay, dst: n.ip, lladdr: n.mac, state: "permanent" });
        done.push(() => this.#nl.deleteNeigh({ dev: this.#overlay!, dst: n.ip }));
      }
      if (d.fdb && this.#overlay) {
        const f = d.fdb;
        this.#nl.replaceFdb({ dev: this.#overlay, mac: f.mac, dst: f.dst });
        if ((this.#macRefs.get(f.mac) ?? 0) <= 1) {
          done.push(() => this.#nl.deleteFdb({ dev: this.#overlay!, mac: f.mac, dst: f.dst }));
        }
      }
      this.#addRoute(d.route);
    } catch (e) {
      for (const undo of done.reverse()) this.#quiet("undo", undo);
      throw e;
    }
  }

  /** Removes one peer's entries: route, FDB (unless another peer shares the MAC), ARP. */
  #unprogram(d: DesiredPeer): void {
    const r = d.route;
    this.#quiet("delete route", () => this.#nl.deleteRoute({ dst: r.dst, via: r.via, dev: r.dev }));
    if (d.fdb && this.#overlay && !this.#macRefs.has(d.fdb.mac)) {
      const f = d.fdb;
      this.#quiet("delete fdb", () => this.#nl.deleteFdb({ dev: this.#overlay!, mac: f.mac, dst: f.dst }));
    }
    if (d.neigh && this.#overlay) {
      const n = d.neigh;
      this.#quiet("delete neigh", () => this.#nl.deleteNeigh({ dev: this.#overlay!, dst: n.ip }));
    }
  }

  /**
   * Sets (or with null removes) one peer's desired entries and applies the change at once.
   * Returns false when programming failed (the next full pass retries).
   */
  setPeer(key: string, d: DesiredPeer | null): boolean {
    const old = this.#desired.get(key);
    if (d && old && samePeer(old, d)) return true;
    if (old) {
      this.#desired.delete(key);
      if (old.fdb) this.#ref(old.fdb.mac, -1);
      // Replace in place when only the values changed: the replace calls below overwrite; remove what the
      // new state no longer has.
      if (!d) {
        this.#unprogram(old);
      } else {
        if (old.route.dst !== d.route.dst) this.#unprogram(old);
        else {
          if (old.fdb && old.fdb.mac !== d.fdb?.mac && !this.#macRefs.has(old.fdb.mac) && this.#overlay) {
            const f = old.fdb;
            this.#quiet(
              "delete fdb",
              () => this.#nl.deleteFdb({ dev: this.#overlay!, mac: f.mac, dst: f.dst }),
            );
          }
          if (old.neigh && !d.neigh && this.#overlay) {
            const n = old.neigh;
            this.#quiet("delete neigh", () => this.#nl.deleteNeigh({ dev: this.#overlay!, dst: n.ip }));
          }
        }
      }
    }
    if (!d) return true;
    this.#desired.set(key, d);
    if (d.fdb) this.#ref(d.fdb.mac, 1);
    try {
      this.#program(d);
      return true;
    } catch (e) {
      this.#stats.reconcileErrors++;
      this.#log.warn("programming peer failed; the next resync retries", { subnet: key, error: errText(e) });
      return false;
    }
  }

  /**
   * Dumps routes once: refreshes the underlay view and returns our routes by dst: {@link CANONICAL} for the
   * one vxlan form (via the dst's network address, onlink, on the overlay device: no string kept per route),
   * else the route key, or the keys when there are several. The dst text is the desired entry's own string
   * where there is one (the dump's copy dies young), which keeps a pass's peak down. With them the overlay
   * device's ifindex in the same dump, which names the device to {@link #eachNeigh} and {@link #eachFdb}.
   */
  #dumpRoutes(): { routes: Map<string, RouteKeys>; overlayIndex: number | null } {
    const underlay: UnderlayRoute[] = [];
    const out = new Map<string, RouteKeys>();
    const ov = this.#overlay;
    const overlayIndex = this.#eachRoute((r) => {
      if (!this.#isOurs(r)) {
        const u = this.#underlayOf(r);
        if (u) underlay.push(u);
        return;
      }
      const dst = this.#desired.get(r.dst)?.route.dst ?? r.dst;
      const k: RouteKeys =
        ov !== null && r.onlink && r.devName === ov && r.gateway !== null && isNetOf(r.gateway, dst)
          ? CANONICAL
          : routeKey(r.gateway, r.devName, r.onlink);
      const l = out.get(dst);
      if (l === undefined) out.set(dst, k);
      else out.set(dst, [...this.#routeKeys(dst, l), ...this.#routeKeys(dst, k)]);
    });
    this.#underlay = underlay;
    return { routes: out, overlayIndex };
  }

  /** The route keys of a {@link #dumpRoutes} entry. */
  #routeKeys(dst: string, v: RouteKeys | undefined): string[] {
    if (v === undefined) return [];
    if (v === CANONICAL) return [routeKey(dst.slice(0, dst.indexOf("/")), this.#overlay, true)];
    return typeof v === "string" ? [v] : v;
  }

  /**
   * Permanent neighbours on the overlay device, each handed to `each` (IP, MAC) as the compact scan delivers
   * it. The device is named by `index`, its ifindex in this pass's links dump ({@link #dumpRoutes}): a device
   * that is gone (null) has no entries, and one made again since the handle cached its name is still read.
   */
  #eachNeigh(index: number | null, each: (ip: string, mac: string | null) => void): void {
    if (index === null) return;
    this.#nl.scanNeighbours({ family: this.#family, dev: index }, (n) => {
      if (n.state & NUD_PERMANENT) each(n.dst, n.lladdr);
    });
  }

  /** FDB entries with a remote on the overlay device, each handed to `each` (MAC, remote IP); as {@link #eachNeigh}. */
  #eachFdb(index: number | null, each: (mac: string, dst: string) => void): void {
    if (index === null) return;
    this.#nl.scanFdb(index, (f) => {
      if (f.dst !== null) each(f.mac, f.dst);
    });
  }

  /**
   * The writes that repair one peer, in order: ARP, FDB, then the route (after deleting a second route for
   * the same dst, other metric/dev, which is not ours to keep; those deletions are `quiet`).
   */
  #repairWrites(r: Repair): { write: NetlinkWrite; quiet: boolean }[] {
    const { d } = r;
    const ov = this.#overlay!;
    const out: { write: NetlinkWrite; quiet: boolean }[] = [];
    if (!r.neighOk) {
      out.push({
        write: {
          op: "replaceNeigh",
          neigh: { dev: ov, dst: d.neigh!.ip, lladdr: d.neigh!.mac, state: "permanent" },
        },
        quiet: false,
      });
    }
    if (!r.fdbOk) {
      out.push({
        write: { op: "replaceFdb", fdb: { dev: ov, mac: d.fdb!.mac, dst: d.fdb!.dst } },
        quiet: false,
      });
    }
    if (!r.routeOk) {
      for (const k of (r.ar ?? []).map(parseRouteKey)) {
        if (k.gateway !== d.route.via || k.devName !== d.route.dev) {
          const del = { dst: d.route.dst, via: k.gateway ?? undefined, dev: k.devName ?? undefined };
          out.push({ write: { op: "deleteRoute", route: del }, quiet: true });
        }
      }
      const rt = d.route;
      out.push({
        write: {
          op: "replaceRoute",
          route: { dst: rt.dst, via: rt.via, dev: rt.dev, onlink: rt.onlink || undefined },
        },
        quiet: false,
      });
    }
    return out;
  }

  #logRepaired(r: Repair): void {
    // A new peer's first programming is counted in the pass's "reconciled" line, not logged as a repair.
    if (r.first) {
      this.#log.debug("programmed peer", { subnet: r.key });
      return;
    }
    this.#log.info("repaired peer entries", {
      subnet: r.key,
      arp: !r.neighOk || undefined,
      fdb: !r.fdbOk || undefined,
      route: !r.routeOk || undefined,
    });
  }

  /**
   * Applies a pass's repairs and stale removals through {@link NetlinkHandle.writeMany}: every write
   * pipelined, each failure reported with its peer or entry. A peer whose write failed keeps nothing of this
   * pass: the ARP and FDB entries just written for it are deleted again (the FDB entry only when no other
   * peer uses the MAC), so no peer is left half-programmed; the next pass retries it.
   */
  #applyPass(repairs: Repair[], stale: Stale[], res: PassResult): void {
    const fail = (what: string, key: string, e: unknown) => {
      res.errors++;
      this.#log.warn(`${what} failed`, { subnet: key, error: errText(e) });
    };
    const writes: NetlinkWrite[] = [];
    const groups: { r: Repair; from: number; quiet: boolean[] }[] = [];
    for (const r of repairs) {
      const ws = this.#repairWrites(r);
      groups.push({ r, from: writes.length, quiet: ws.map((w) => w.quiet) });
      for (const w of ws) writes.push(w.write);
    }
    const staleFrom = writes.length;
    for (const st of stale) writes.push(st.write);
    const errs = this.#nl.writeMany(writes);
    const undo: NetlinkWrite[] = [];
    for (const g of groups) {
      let first: Error | null = null;
      g.quiet.forEach((q, i) => {
        const e = errs[g.from + i];
        if (e && q) this.#log.debug("delete route (already gone?)", { error: errText(e) });
        else if (e && !first) first = e;
      });
      if (!first) {
        res.programmed += g.quiet.filter((q) => !q).length;
        this.#logRepaired(g.r);
        continue;
      }
      fail("repairing peer", g.r.key, first);
      g.quiet.forEach((q, i) => {
        const w = writes[g.from + i];
        if (q || errs[g.from + i]) return;
        if (w.op === "replaceNeigh") {
          undo.push({ op: "deleteNeigh", neigh: { dev: w.neigh.dev, dst: w.neigh.dst } });
        } else if (w.op === "replaceFdb" && (this.#macRefs.get(w.fdb.mac) ?? 0) <= 1) {
          undo.push({ op: "deleteFdb", fdb: w.fdb });
        }
      });
    }
    stale.forEach((st, i) => {
      const e = errs[staleFrom + i];
      if (e) fail(`removing ${st.what}`, st.key, e);
      else {
        res.removed++;
        this.#log.info(`removed ${st.what}`, st.fields);
      }
    });
    if (undo.length) {
      this.#nl.writeMany(undo).forEach((e) => {
        if (e) this.#log.debug("undo (already gone?)", { error: errText(e) });
      });
    }
  }

  /**
   * One full pass. Dumps routes, neighbours and FDB once, lets `compute` build the whole desired state
   * (it may use {@link Reconciler.reach}, refreshed from the same dump), and applies the differences:
   * per object kind (`#routeDiff`, `#neighDiff`, `#fdbDiff`) what a desired peer lacks and
   * what no peer wants any more.
   */
  fullPass(compute?: () => Map<string, DesiredPeer>): PassResult {
    const t0 = performance.now();
    const res: PassResult = { programmed: 0, removed: 0, errors: 0 };
    // The route dump is reduced to compact strings (it is taken before `compute`, which needs its underlay
    // routes); neighbours and FDB entries are compared against the desired state while they are dumped.
    const { routes: actualRoutes, overlayIndex } = this.#dumpRoutes();
    // Peers not desired before this pass: their entries are programmed for the first time, not repaired.
    let fresh: Set<string> | null = null;
    if (compute) {
      const next = compute();
      for (const k of next.keys()) if (!this.#desired.has(k)) (fresh ??= new Set()).add(k);
      this.#setDesired(next);
    }
    const ov = this.#overlay;
    const routes = this.#routeDiff(actualRoutes);
    const neigh = this.#neighDiff(ov, overlayIndex);
    const fdb = this.#fdbDiff(ov, overlayIndex);
    const repairs: Repair[] = [];
    for (const [key, d] of this.#desired) {
      const neighOk = neigh.ok(d), fdbOk = fdb.ok(d), routeOk = routes.ok(d);
      if (neighOk && fdbOk && routeOk) continue;
      repairs.push({
        key,
        d,
        neighOk,
        fdbOk,
        routeOk,
        ar: this.#routeKeys(d.route.dst, actualRoutes.get(d.route.dst)),
        first: fresh?.has(key) ?? false,
      });
    }
    this.#applyPass(repairs, [...routes.stale, ...neigh.stale, ...fdb.stale], res);
    this.#stats.reconcileRuns++;
    this.#stats.reconcileErrors += res.errors;
    this.#stats.repairs += res.programmed + res.removed;
    this.#stats.observeReconcile((performance.now() - t0) / 1000);
    return res;
  }

  /** Replaces the desired state (and the FDB MAC reference counts) with `next`. */
  #setDesired(next: Map<string, DesiredPeer>): void {
    this.#desired.clear();
    this.#macRefs.clear();
    for (const [k, d] of next) {
      this.#desired.set(k, d);
      if (d.fdb) this.#ref(d.fdb.mac, 1);
    }
  }

  /** Routes: a desired peer's route is right when it is our only route to its dst; others are stale. */
  #routeDiff(actual: Map<string, RouteKeys>): KindDiff {
    const stale: Stale[] = [];
    for (const [dst, rs] of actual) {
      if (this.#desired.has(dst)) continue;
      for (const r of this.#routeKeys(dst, rs).map(parseRouteKey)) {
        stale.push({
          write: {
            op: "deleteRoute",
            route: { dst, via: r.gateway ?? undefined, dev: r.devName ?? undefined },
          },
          what: "stale route",
          key: dst,
          fields: { dst, via: r.gateway, dev: r.devName },
        });
      }
    }
    const ok = (d: DesiredPeer) => {
      const ar = actual.get(d.route.dst);
      // The canonical form is the key routeKey(network address of dst, overlay, onlink).
      if (ar === CANONICAL) return d.route.dev === this.#overlay && isNetOf(d.route.via, d.route.dst);
      return typeof ar === "string" && (ar === routeKey(d.route.via, d.route.dev, true) ||
        (!d.route.onlink && ar === routeKey(d.route.via, d.route.dev, false)));
    };
    return { ok, stale };
  }

  /**
   * Permanent neighbours on the overlay device (none without one): IP → MAC as desired, others stale.
   * Compared while the dump runs, against the desired entries by IP: no map of every kernel entry is built
   * (its strings would be promoted with it); only what differs is kept.
   */
  #neighDiff(ov: string | null, index: number | null): KindDiff {
    const stale: Stale[] = [];
    if (!ov) return { ok: () => true, stale };
    const want = new Map<string, DesiredPeer>();
    for (const d of this.#desired.values()) if (d.neigh) want.set(d.neigh.ip, d);
    /** Desired entries the kernel holds as desired. */
    const right = new Set<DesiredPeer>();
    /** The kernel's MAC for a desired IP where it is not the desired one. */
    const other = new Map<string, string | null>();
    const staleIps = new Set<string>();
    this.#eachNeigh(index, (ip, mac) => {
      const d = want.get(ip);
      if (!d) staleIps.add(ip);
      else if (mac === d.neigh!.mac) right.add(d), other.delete(ip);
      else right.delete(d), other.set(ip, mac);
    });
    for (const ip of staleIps) {
      stale.push({
        write: { op: "deleteNeigh", neigh: { dev: ov, dst: ip } },
        what: "stale ARP entry",
        key: ip,
        fields: { ip, dev: ov },
      });
    }
    const ok = (d: DesiredPeer) => {
      if (!d.neigh) return true;
      const w = want.get(d.neigh.ip)!;
      return right.has(w) ? w.neigh!.mac === d.neigh.mac : other.get(d.neigh.ip) === d.neigh.mac;
    };
    return { ok, stale };
  }

  /**
   * FDB entries on the overlay device (none without one): MAC → the desired remote, entries of MACs no peer
   * wants stale. Compared while the dump runs, as {@link #neighDiff}. A desired MAC with another remote is
   * not stale: the kernel keeps one remote per unicast MAC and the repair's `fdb replace` moves it (a
   * `fdb del MAC dst OLD` after it would succeed without removing anything).
   */
  #fdbDiff(ov: string | null, index: number | null): KindDiff {
    const stale: Stale[] = [];
    if (!ov) return { ok: () => true, stale };
    const want = new Map<string, DesiredPeer>();
    for (const d of this.#desired.values()) if (d.fdb) want.set(d.fdb.mac, d);
    /** Desired MACs (by their desired peer) whose desired remote the kernel holds. */
    const right = new Set<DesiredPeer>();
    /** Other remotes the kernel holds per MAC (stale, below, unless the MAC is desired). */
    const other = new Map<string, string[]>();
    const add = (mac: string, dst: string) => {
      const l = other.get(mac);
      if (l) l.push(dst);
      else other.set(mac, [dst]);
    };
    this.#eachFdb(index, (mac, dst) => {
      const d = want.get(mac);
      if (d && dst === d.fdb!.dst) right.add(d);
      else add(mac, dst);
    });
    for (const [mac, dsts] of other) {
      if (want.has(mac)) continue;
      for (const dst of dsts) {
        stale.push({
          write: { op: "deleteFdb", fdb: { dev: ov, mac, dst } },
          what: "stale FDB entry",
          key: mac,
          fields: { mac, dst, dev: ov },
        });
      }
    }
    const ok = (d: DesiredPeer) => {
      if (!d.fdb) return true;
      const w = want.get(d.fdb.mac)!;
      return (right.has(w) && w.fdb!.dst === d.fdb.dst) ||
        (other.get(d.fdb.mac)?.includes(d.fdb.dst) ?? false);
    };
    return { ok, stale };
  }
}
