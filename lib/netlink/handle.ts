/**
 * The libnl implementation of {@link NetlinkHandle}: one NETLINK_ROUTE socket, created inside the target
 * network namespace, read through libnl caches and written through libnl objects (raw messages where libnl
 * has no setter). Every libnl object allocated or referenced here is released before the method returns.
 *
 * This module keeps the socket's life cycle, its error checks and the name → ifindex cache; the work on
 * each kernel object lives in its own module (link.ts, addr.ts, route.ts, neigh.ts, nsid.ts), reached
 * through the handle's {@link Conn}.
 * @module
 */
import { FlanctlError, ParseError } from "../errors.ts";
import { libc, nl, OutPtr } from "./ffi.ts";
import { NetlinkError, NLE } from "./errors.ts";
import { inNetns } from "./netns.ts";
import { getTxChecksum, setTxChecksum } from "./ethtool.ts";
import { NETLINK_CAP_ACK, NETLINK_EXT_ACK, NETLINK_ROUTE, SOL_NETLINK } from "./consts.ts";
import { type Conn, geterror, type Ptr } from "./conn.ts";
import * as link from "./link.ts";
import * as addr from "./addr.ts";
import * as route from "./route.ts";
import * as neigh from "./neigh.ts";
import * as nsid from "./nsid.ts";
import * as routeget from "./routeget.ts";
import { indexOfName } from "./linkmsg.ts";
import { writeMany } from "./batch.ts";
import type {
  AddrInfo,
  FdbInfo,
  FdbScanEntry,
  LinkInfo,
  LinkRef,
  NeighInfo,
  NeighScanEntry,
  NetlinkHandle,
  NetlinkWrite,
  NetnsRef,
  RouteInfo,
  RouteScanEntry,
  RouteSpec,
  VethCreateOptions,
  VxlanCreateOptions,
} from "./types.ts";

export { networkOf } from "./route.ts";

/** Opens a handle on namespace `ns` (null: the namespace this thread is in). */
export function openLibnl(ns: NetnsRef | null): NetlinkHandle {
  return new LibnlHandle(ns);
}

// A handle that is garbage-collected without close() still frees its socket.
const finalizer = new FinalizationRegistry<bigint>((addr) => {
  const p = Deno.UnsafePointer.create(addr);
  if (p) nl().nl_socket_free(p);
});

class LibnlHandle implements NetlinkHandle {
  readonly netns: NetnsRef | null;
  #sk: Ptr;
  #closed = false;
  /** name → ifindex; cleared on link changes and retried once on "No such device". */
  readonly #ifindex = new Map<string, number>();
  /** What the per-object modules work on: this socket, its checks, the name cache, scratch buffers. */
  readonly #c: Conn = {
    sock: () => this.#sk,
    live: () => this.#live(),
    check: (err, op) => this.#check(err, op),
    retry: (fn) => this.#retry(fn),
    index: (ref, op) => this.#index(ref, op),
    forget: () => this.#ifindex.clear(),
    out: new OutPtr(),
    out2: new OutPtr(),
    i32: new Int32Array(1),
    u32: new Uint32Array(1),
    b4: new Uint8Array(4),
    b16: new Uint8Array(16),
    b6: new Uint8Array(6),
    /** JS copy of the last receive buffer of a compact scan (grown as needed, reused). */
    rx: new Uint8Array(64 * 1024),
  };

  constructor(ns: NetnsRef | null) {
    this.netns = ns;
    const sk = inNetns(ns, () => {
      const s = nl().nl_socket_alloc();
      if (s === null) throw new NetlinkError("socket alloc", -NLE.NOMEM, geterror(-NLE.NOMEM));
      const err = nl().nl_connect(s, NETLINK_ROUTE);
      if (err < 0) {
        nl().nl_socket_free(s);
        throw new NetlinkError("netlink connect", err, geterror(err));
      }
      return s;
    });
    // Large dumps (10k routes) in fewer recv() calls.
    nl().nl_socket_set_buffer_size(sk, 1 << 20, 1 << 18);
    // Raw dumps and RTM_GETNSID read their answers themselves (nl_recv), which libnl's expected-sequence
    // counter does not see; requests and answers on this socket are strictly one at a time, in order.
    nl().nl_socket_disable_seq_check(sk);
    // Kernel error texts (extended ack, what iproute2 prints as "Error: ..."), and acks without the echoed
    // request. Best effort: older kernels just ignore them.
    const fd = nl().nl_socket_get_fd(sk);
    const one = new Uint8Array(new Int32Array([1]).buffer);
    libc().setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, one, 4);
    libc().setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, one, 4);
    this.#sk = sk;
    finalizer.register(this, Deno.UnsafePointer.value(sk) as bigint, this);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    finalizer.unregister(this);
    nl().nl_socket_free(this.#sk);
    this.#sk = null;
  }

  // ---------------------------------------------------------------- helpers

  #live(): Ptr {
    if (this.#closed) throw new FlanctlError("netlink handle used after close()");
    return this.#sk;
  }

  #check(err: number, op: () => string): void {
    if (err < 0) throw new NetlinkError(op(), err, geterror(err));
  }

  /** Runs `fn` once more with a fresh name cache when it failed with "No such device". */
  #retry<T>(fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      if (e instanceof NetlinkError && e.code === -NLE.NODEV && this.#ifindex.size > 0) {
        this.#ifindex.clear();
        return fn();
      }
      throw e;
    }
  }

  /** ifindex of a link name or number (cached per handle). */
  #index(ref: LinkRef, op: () => string): number {
    if (typeof ref === "number") {
      if (!Number.isInteger(ref) || ref <= 0) throw new ParseError("dev", `bad ifindex ${ref}`);
      return ref;
    }
    if (typeof ref !== "string" || ref === "" || ref.length > 15) {
      throw new ParseError("dev", `bad interface name '${ref}' (1..15 characters)`);
    }
    const hit = this.#ifindex.get(ref);
    if (hit !== undefined) return hit;
    this.#live();
    const idx = indexOfName(this.#c, ref, op);
    this.#ifindex.set(ref, idx);
    return idx;
  }

  // ---------------------------------------------------------------- kernel objects

  links(): LinkInfo[] {
    return link.links(this.#c);
  }

  link(ref: LinkRef): LinkInfo | null {
    return link.link(this.#c, ref);
  }

  createBridge(name: string, opts: { mtu?: number; mac?: string } = {}): void {
    return link.createBridge(this.#c, name, opts);
  }

  createDummy(name: string, opts: { mtu?: number; mac?: string } = {}): void {
    return link.createDummy(this.#c, name, opts);
  }

  createVxlan(
    name: string,
    opts: VxlanCreateOptions,
  ): void {
    return link.createVxlan(this.#c, name, opts);
  }

  createVeth(
    name: string,
    peerName: string,
    opts: VethCreateOptions = {},
  ): void {
    return link.createVeth(this.#c, name, peerName, opts);
  }

  setUp(ref: LinkRef, up: boolean): void {
    return link.setUp(this.#c, ref, up);
  }

  setMtu(ref: LinkRef, mtu: number): void {
    return link.setMtu(this.#c, ref, mtu);
  }

  setMac(ref: LinkRef, mac: string): void {
    return link.setMac(this.#c, ref, mac);
  }

  setMaster(ref: LinkRef, master: LinkRef | null): void {
    return link.setMaster(this.#c, ref, master);
  }

  setHairpin(ref: LinkRef, on: boolean): void {
    return link.setHairpin(this.#c, ref, on);
  }

  moveToNetns(ref: LinkRef, netns: NetnsRef, newName?: string): void {
    return link.moveToNetns(this.#c, ref, netns, newName);
  }

  deleteLink(ref: LinkRef): void {
    return link.deleteLink(this.#c, ref);
  }

  addrs(family?: 4 | 6): AddrInfo[] {
    return addr.addrs(this.#c, family);
  }

  addAddr(
    ref: LinkRef,
    cidr: string,
    opts: { scope?: "universe" | "link" | "host"; noprefixroute?: boolean; broadcast?: boolean } = {},
  ): void {
    return addr.addAddr(this.#c, ref, cidr, opts);
  }

  delAddr(ref: LinkRef, cidr: string): void {
    return addr.delAddr(this.#c, ref, cidr);
  }

  routes(opts: { family?: 4 | 6; table?: number } = {}): RouteInfo[] {
    return route.routes(this.#c, opts);
  }

  replaceRoute(spec: RouteSpec): void {
    return route.replaceRoute(this.#c, spec);
  }

  deleteRoute(spec: RouteSpec): void {
    return route.deleteRoute(this.#c, spec);
  }

  scanRoutes(
    opts: { family?: 4 | 6; table?: number; dev?: LinkRef },
    each: (r: Readonly<RouteScanEntry>) => void,
  ): void {
    return route.scanRoutes(this.#c, opts, each);
  }

  neighbours(family?: 4 | 6): NeighInfo[] {
    return neigh.neighbours(this.#c, family);
  }

  fdb(): FdbInfo[] {
    return neigh.fdb(this.#c);
  }

  replaceNeigh(
    n: { dev: LinkRef; dst: string; lladdr: string; state?: "permanent" | "reachable" | "noarp" },
  ): void {
    return neigh.replaceNeigh(this.#c, n);
  }

  deleteNeigh(n: { dev: LinkRef; dst: string }): void {
    return neigh.deleteNeigh(this.#c, n);
  }

  replaceFdb(f: { dev: LinkRef; mac: string; dst: string }): void {
    return neigh.replaceFdb(this.#c, f);
  }

  deleteFdb(f: { dev: LinkRef; mac: string; dst?: string }): void {
    return neigh.deleteFdb(this.#c, f);
  }

  scanNeighbours(opts: { family?: 4 | 6; dev: LinkRef }, each: (n: Readonly<NeighScanEntry>) => void): void {
    return neigh.scanNeighbours(this.#c, opts, each);
  }

  scanFdb(dev: LinkRef, each: (f: Readonly<FdbScanEntry>) => void): void {
    return neigh.scanFdb(this.#c, dev, each);
  }

  writeMany(writes: readonly NetlinkWrite[]): (Error | null)[] {
    return writeMany(this.#c, writes);
  }

  // ---------------------------------------------------------------- ethtool

  txChecksum(name: string): boolean {
    this.#live();
    return getTxChecksum(this.netns, name);
  }

  setTxChecksum(name: string, on: boolean): void {
    this.#live();
    setTxChecksum(this.netns, name, on);
  }

  /**
   * The id this namespace uses for the namespace open at `fd` (RTM_GETNSID with NETNSA_FD), or null
   * when none is assigned (the query does not assign one). Not part of {@link NetlinkHandle}; used by
   * veth pairing.
   */
  nsidOf(fd: number): number | null {
    return nsid.nsidOf(this.#c, fd);
  }

  /** The kernel's route lookup for one packet (RTM_GETROUTE); not part of {@link NetlinkHandle}. */
  routeGet(q: routeget.RouteQuery): routeget.RouteLookup {
    return routeget.routeGet(this.#c, q, (i) => link.link(this.#c, i)?.name ?? null);
  }
}

/** The RTM_GETNSID query for handles made by {@link openLibnl} (veth pairing needs it). */
export function nsidOf(h: NetlinkHandle, fd: number): number | null {
  if (!(h instanceof LibnlHandle)) throw new FlanctlError("nsidOf needs a libnl handle");
  return h.nsidOf(fd);
}

/** `ip route get` for handles made by {@link openLibnl} (see {@link routeget.routeGet}). */
export function routeGet(h: NetlinkHandle, q: routeget.RouteQuery): routeget.RouteLookup {
  if (!(h instanceof LibnlHandle)) throw new FlanctlError("routeGet needs a libnl handle");
  return h.routeGet(q);
}
