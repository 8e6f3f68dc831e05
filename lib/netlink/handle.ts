/**
 * The libnl implementation of {@link NetlinkHandle}: one NETLINK_ROUTE socket, created inside the target
 * network namespace with libc's socket(2). Requests built in JavaScript (msg.ts) go out and their answers
 * come back through libc's send/recv on its descriptor (batch.ts); libnl's nl_sock is put over the same
 * descriptor only when a libnl cache, object or libnl-built message is first used (nl_socket_set_fd), so a
 * CNI call, which sends raw requests only, neither loads libnl nor binds any of its symbols. Every libnl
 * object allocated or referenced here is released before the method returns.
 *
 * This module keeps the socket's life cycle, its error checks and the name → ifindex cache; the work on
 * each kernel object lives in its own module (link.ts, addr.ts, route.ts, neigh.ts, nsid.ts), reached
 * through the handle's {@link Conn}.
 * @module
 */
import { FlanctlError, ParseError } from "../base/errors.ts";
import { errno, libc, nl, OutPtr } from "../sys/ffi.ts";
import { NetlinkError, NLE, syscallError } from "../sys/errors.ts";
import { inNetns } from "../sys/netns.ts";
import { getTxChecksum, setTxChecksum } from "../sys/ethtool.ts";
import {
  AF_NETLINK,
  NETLINK_CAP_ACK,
  NETLINK_EXT_ACK,
  NETLINK_ROUTE,
  SO_RCVBUF,
  SO_SNDBUF,
  SOCK_CLOEXEC,
  SOCK_RAW,
  SOL_NETLINK,
  SOL_SOCKET,
} from "./codec/consts.ts";
import { type Conn, geterror, type Ptr } from "./conn.ts";
import * as link from "./link.ts";
import * as addr from "./addr.ts";
import * as route from "./route.ts";
import * as neigh from "./neigh.ts";
import * as nsid from "./nsid.ts";
import * as routeget from "./routeget.ts";
import { neighTables } from "./neightbl.ts";
import { indexOfName } from "./linkmsg.ts";
import { writeMany } from "./batch.ts";
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
  NeighTableInfo,
  NetlinkHandle,
  NetlinkWrite,
  NetnsRef,
  RouteDelSpec,
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

/** A handle's socket: its descriptor and, once made, the nl_sock over it (which then owns the descriptor). */
interface Sock {
  fd: number;
  sk: Ptr;
}

/** Closes `s`: libnl's nl_sock frees itself and closes the descriptor; a bare descriptor is closed. */
function closeSock(s: Sock): void {
  if (s.sk !== null) nl().nl_socket_free(s.sk);
  else if (s.fd >= 0) libc().close(s.fd);
  s.sk = null;
  s.fd = -1;
}

// A handle that is garbage-collected without close() still closes its socket.
const finalizer = new FinalizationRegistry<Sock>(closeSock);

/** int as a setsockopt value. */
function int32(v: number): Uint8Array<ArrayBuffer> {
  return new Uint8Array(new Int32Array([v]).buffer);
}

/** sockaddr_nl with port 0: bind(2) lets the kernel pick the port. */
const ANY_PORT = new Uint8Array(new Uint16Array([AF_NETLINK, 0, 0, 0, 0, 0]).buffer);

class LibnlHandle implements NetlinkHandle {
  readonly netns: NetnsRef | null;
  readonly #s: Sock;
  #closed = false;
  /** name → ifindex; cleared on link changes and retried once on "No such device". */
  readonly #ifindex = new Map<string, number>();
  /** What the per-object modules work on: this socket, its checks, the name cache, scratch buffers. */
  readonly #c: Conn = {
    sock: () => this.#nlSock(),
    live: () => this.#live(),
    fd: () => this.#fd(),
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
    const fd = inNetns(ns, () => {
      const f = libc().socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
      if (f < 0) throw syscallError("netlink socket", errno());
      return f;
    });
    this.#s = { fd, sk: null };
    // Large dumps (10k routes) in fewer recv() calls (what nl_socket_set_buffer_size(1 MiB, 256 KiB) did).
    libc().setsockopt(fd, SOL_SOCKET, SO_SNDBUF, int32(1 << 18), 4);
    libc().setsockopt(fd, SOL_SOCKET, SO_RCVBUF, int32(1 << 20), 4);
    // Kernel error texts (extended ack, what iproute2 prints as "Error: ..."), and acks without the echoed
    // request. Best effort: older kernels just ignore them.
    const one = int32(1);
    libc().setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, one, 4);
    libc().setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, one, 4);
    finalizer.register(this, this.#s, this);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    finalizer.unregister(this);
    closeSock(this.#s);
  }

  // ---------------------------------------------------------------- helpers

  #live(): Ptr {
    if (this.#closed) throw new FlanctlError("netlink handle used after close()");
    return this.#nlSock();
  }

  #fd(): number {
    if (this.#closed) throw new FlanctlError("netlink handle used after close()");
    return this.#s.fd;
  }

  /** libnl's nl_sock over our descriptor, made on first use (it then owns the descriptor). */
  #nlSock(): Ptr {
    const s = this.#s;
    if (s.sk !== null || s.fd < 0) return s.sk;
    const sk = nl().nl_socket_alloc();
    if (sk === null) throw new NetlinkError("socket alloc", -NLE.NOMEM, geterror(-NLE.NOMEM));
    // nl_socket_set_fd wants a bound socket; one that already sent a request was bound by the kernel then
    // (bind answers EINVAL, and the port stays).
    libc().bind(s.fd, ANY_PORT, ANY_PORT.length);
    const err = nl().nl_socket_set_fd(sk, NETLINK_ROUTE, s.fd);
    if (err < 0) {
      nl().nl_socket_free(sk); // not connected: leaves our descriptor open
      throw new NetlinkError("netlink connect", err, geterror(err));
    }
    // Raw dumps and RTM_GETNSID read their answers themselves (nl_recv), which libnl's expected-sequence
    // counter does not see; requests and answers on this socket are strictly one at a time, in order.
    nl().nl_socket_disable_seq_check(sk);
    s.sk = sk;
    return sk;
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
    this.#fd();
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

  createWireguard(name: string, opts: { mtu?: number } = {}): void {
    return link.createWireguard(this.#c, name, opts);
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

  deleteRoute(spec: RouteDelSpec): void {
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

  replaceNeigh(n: NeighSpec): void {
    return neigh.replaceNeigh(this.#c, n);
  }

  deleteNeigh(n: { dev: LinkRef; dst: string }): void {
    return neigh.deleteNeigh(this.#c, n);
  }

  replaceFdb(f: FdbSpec): void {
    return neigh.replaceFdb(this.#c, f);
  }

  deleteFdb(f: FdbDelSpec): void {
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
    this.#fd();
    return getTxChecksum(this.netns, name);
  }

  setTxChecksum(name: string, on: boolean): void {
    this.#fd();
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

  /** The host's neighbour tables (RTM_GETNEIGHTBL); not part of {@link NetlinkHandle}. */
  neighTables(family?: 4 | 6): NeighTableInfo[] {
    return neighTables(this.#c, family);
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

/**
 * The host's neighbour tables (`ip -s ntable show`) read on `h`'s socket: entries, gc thresholds and
 * statistics, host-wide whatever namespace `h` is in.
 */
export function readNeighTables(h: NetlinkHandle, family?: 4 | 6): NeighTableInfo[] {
  if (!(h instanceof LibnlHandle)) throw new FlanctlError("readNeighTables needs a libnl handle");
  return h.neighTables(family);
}
