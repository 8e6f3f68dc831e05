/**
 * Plain typed views of kernel network objects, and the handle interface every part of flanctl uses to
 * read and write them. The FFI implementation (`handle.ts`) and any fake kernel implement
 * {@link NetlinkHandle}; no pointer ever appears in these types.
 * @module
 */

import type { NetnsRef } from "../sys/netns.ts";
import type { Cidr, Ip, Mac } from "../base/cidr.ts";
export type { NetnsRef };

/** Parameters of a VXLAN device. */
export interface VxlanInfo {
  /** VXLAN network identifier. */
  vni: number;
  /** UDP destination port (host order); 0 = kernel default (8472). */
  port: number;
  /** Local (source) IP, if set. */
  local: string | null;
  /** ifindex of the underlay device, if set. */
  dev: number | null;
  /** Learning of remote MACs. flannel turns it off. */
  learning: boolean;
  /** Group Based Policy extension. */
  gbp: boolean;
}

/** A network interface. */
export interface LinkInfo {
  /** ifindex (unique only within its namespace). */
  index: number;
  /** Interface name. */
  name: string;
  /** rtnl link kind: "veth", "bridge", "vxlan", "dummy", …; null for physical devices and lo. */
  kind: string | null;
  /** Interface flags in iproute2's spelling: "UP", "BROADCAST", "LOWER_UP", "NOARP", … */
  flags: string[];
  /** Administrative state (IFF_UP). */
  up: boolean;
  /** Operational state as iproute2 prints it: "UP", "DOWN", "UNKNOWN", "LOWERLAYERDOWN", … */
  operstate: string;
  /** MTU in bytes. */
  mtu: number;
  /** "aa:bb:cc:dd:ee:ff", or null when the link has no L2 address. */
  mac: string | null;
  /** ifindex of the master (bridge) device, or null. */
  master: number | null;
  /** IFLA_LINK: the parent/peer ifindex (for a veth: the peer's ifindex in the peer's netns), or null. */
  parent: number | null;
  /** IFLA_LINK_NETNSID: id (as seen from this netns) of the netns where `parent` lives, or null. */
  linkNetnsId: number | null;
  /** Present for kind "vxlan". */
  vxlan?: VxlanInfo;
  /** Present when the link is a bridge port. */
  bridgePort?: { hairpin: boolean };
}

/** An interface address. */
export interface AddrInfo {
  /** ifindex of the interface. */
  index: number;
  /** Interface name. */
  ifname: string;
  /** Address family. */
  family: 4 | 6;
  /** The address, without prefix. */
  local: string;
  /** Prefix length. */
  prefix: number;
  /** "global", "link", "host", … */
  scope: string;
}

/** A route. */
export interface RouteInfo {
  /** Address family. */
  family: 4 | 6;
  /** "default" or a CIDR such as "10.244.2.0/24" (host routes carry /32 or /128). */
  dst: string;
  /** Next hop, or null. */
  gateway: string | null;
  /** Output ifindex, or null. */
  dev: number | null;
  /** Output interface name, or null. */
  devName: string | null;
  /** "universe" (iproute2: global), "link", "host", "nowhere" or a number. */
  scope: string;
  /** Route next-hop flags in iproute2's spelling, e.g. ["onlink"]. */
  flags: string[];
  /** Routing table id (254 = main). */
  table: number;
  /** "kernel", "boot", "static", … or a number as string. */
  protocol: string;
  /** "unicast", "local", "broadcast", … */
  type: string;
  /** Preferred source, or null. */
  prefsrc: string | null;
  /** Priority/metric, or null. */
  metric: number | null;
}

/** A neighbour (ARP/NDP) entry. */
export interface NeighInfo {
  /** Address family. */
  family: 4 | 6;
  /** ifindex of the interface. */
  index: number;
  /** Interface name. */
  ifname: string;
  /** The IP address. */
  dst: string;
  /** Link-layer address, or null (e.g. FAILED/INCOMPLETE). */
  lladdr: string | null;
  /** NUD states in iproute2's spelling: ["PERMANENT"], ["REACHABLE"], ["STALE"], … */
  state: string[];
}

/**
 * A neighbour table as the kernel accounts it (RTM_GETNEIGHTBL, `ip -s ntable show`): host-wide, shared by
 * every network namespace. Counters count since boot.
 */
export interface NeighTableInfo {
  /** "arp_cache" (IPv4) or "ndisc_cache" (IPv6). */
  name: string;
  /** The table's address family. */
  family: 4 | 6;
  /** Entries in the table, every namespace and state (permanent ones included). */
  entries: number;
  /** net.ipv4/ipv6.neigh.default.gc_thresh1: below it the periodic collector leaves entries alone. */
  gcThresh1: number;
  /** gc_thresh2: past it an allocation forces a collection (at most every 5 s). */
  gcThresh2: number;
  /** gc_thresh3: past it, with nothing to collect, new entries are refused. */
  gcThresh3: number;
  /** gc_interval in ms, or null when not reported. */
  gcIntervalMs: number | null;
  /** Entries allocated since boot. */
  allocs: number;
  /** Entries destroyed since boot. */
  destroys: number;
  /** Resolutions that failed. */
  resFailed: number;
  /** Periodic collector runs. */
  periodicGcRuns: number;
  /** Garbage collections forced by an allocation past gc_thresh2/3. */
  forcedGcRuns: number;
  /** Allocations refused: the table was full (past gc_thresh3 and nothing to collect). */
  tableFulls: number;
}

/** A forwarding-database entry (AF_BRIDGE neighbour). */
export interface FdbInfo {
  /** ifindex of the port/device the entry is on. */
  index: number;
  /** Name of the port/device the entry is on. */
  ifname: string;
  /** The entry's MAC address. */
  mac: string;
  /** Remote VTEP IP for VXLAN entries, or null. */
  dst: string | null;
  /** ifindex of the bridge master for bridge port entries, or null. */
  master: number | null;
  /** NTF flags in iproute2's spelling: "self", "master", "extern_learn", … */
  flags: string[];
  /** NUD states: ["PERMANENT"], ["NOARP"] (static), … */
  state: string[];
  /** VLAN id, or null. */
  vlan: number | null;
}

/**
 * One route next hop as {@link NetlinkHandle.scanRoutes} yields it: numbers where {@link RouteInfo} has
 * names, and ONE object reused for every entry of a scan (copy what you keep). For reconcile passes over
 * thousands of routes, where building a RouteInfo per route is most of the garbage.
 */
export interface RouteScanEntry {
  /** Address family. */
  family: 4 | 6;
  /** "default" or a CIDR, as in {@link RouteInfo.dst}. */
  dst: string;
  /** Next hop, or null. */
  gateway: string | null;
  /** Output ifindex, or null. */
  dev: number | null;
  /** RTNH_F_ONLINK set on the next hop. */
  onlink: boolean;
  /** Routing table id (254 = main). */
  table: number;
  /** rtm_protocol (2 = kernel, 3 = boot, 4 = static). */
  protocol: number;
  /** rtm_type (1 = unicast). */
  type: number;
  /** Priority/metric, or null. */
  metric: number | null;
}

/** One neighbour as {@link NetlinkHandle.scanNeighbours} yields it (one object reused per scan). */
export interface NeighScanEntry {
  /** Address family. */
  family: 4 | 6;
  /** ifindex of the interface. */
  index: number;
  /** The IP address. */
  dst: string;
  /** Lower-case MAC, or null. */
  lladdr: string | null;
  /** NUD state bits (0x80 = PERMANENT, 0x40 = NOARP, 0x02 = REACHABLE, …). */
  state: number;
}

/** One FDB entry as {@link NetlinkHandle.scanFdb} yields it (one object reused per scan). */
export interface FdbScanEntry {
  /** ifindex of the port/device the entry is on. */
  index: number;
  /** Lower-case MAC. */
  mac: string;
  /** Remote VTEP IP, or null. */
  dst: string | null;
}

/** A link named by ifindex or by name. */
export type LinkRef = number | string;

/**
 * A VXLAN FDB entry: frames for VTEP MAC `mac` leave device `dev` towards the underlay IP `dst` (flannel's
 * one entry per peer; `bridge fdb replace MAC dev DEV dst IP self permanent`).
 */
export interface FdbSpec {
  /** The VXLAN device. */
  dev: LinkRef;
  /** The remote VTEP's MAC. */
  mac: Mac;
  /** The remote VTEP's underlay (public) IP. */
  dst: Ip;
}

/**
 * The FDB entry {@link NetlinkHandle.deleteFdb} removes, named as the kernel reported it (plain strings:
 * deletes take what a dump returned); without `dst`, every remote of `mac` on `dev`.
 */
export type FdbDelSpec = Omit<FdbSpec, "mac" | "dst"> & { mac: string; dst?: string };

/** What to create/replace/delete for a route. */
export interface RouteSpec {
  /** "default" or CIDR. */
  dst: Cidr | "default";
  /** Next-hop gateway. */
  via?: Ip;
  /** Output device. */
  dev?: LinkRef;
  /** RTNH_F_ONLINK: the gateway is on the link even without a route to it. */
  onlink?: boolean;
  /** "universe" (default), "link", "host". */
  scope?: "universe" | "link" | "host";
  /** Table id, default 254 (main). */
  table?: number;
  /** Protocol number or name ("boot" = 3, default; "static" = 4). */
  protocol?: number | string;
  /** Priority/metric. */
  metric?: number;
  /** Preferred source address. */
  src?: Ip;
  /** Route type: "unicast" (default) or "blackhole" (`ip route add blackhole CIDR`, no device). */
  type?: "unicast" | "blackhole";
}

/**
 * The route {@link NetlinkHandle.deleteRoute} removes, named as the kernel reported it (plain strings, as
 * {@link FdbDelSpec}).
 */
export type RouteDelSpec = Omit<RouteSpec, "dst" | "via" | "src"> & {
  dst: string;
  via?: string;
  src?: string;
};

/** A neighbour entry to replace (`ip neigh replace DST lladdr MAC dev DEV nud STATE`). */
export interface NeighSpec {
  /** The device. */
  dev: LinkRef;
  /** The IP address. */
  dst: Ip;
  /** The link-layer (MAC) address. */
  lladdr: Mac;
  /** Default "permanent". */
  state?: "permanent" | "reachable" | "noarp";
}

/** One request of {@link NetlinkHandle.writeMany}: the arguments of the one-at-a-time method it names. */
export type NetlinkWrite =
  | { op: "replaceRoute"; route: RouteSpec }
  | { op: "deleteRoute"; route: RouteDelSpec }
  | { op: "replaceNeigh"; neigh: NeighSpec }
  | { op: "deleteNeigh"; neigh: { dev: LinkRef; dst: string } }
  | { op: "replaceFdb"; fdb: FdbSpec }
  | { op: "deleteFdb"; fdb: FdbDelSpec };

/** Parameters for {@link NetlinkHandle.createVxlan} (`ip link add NAME type vxlan id VNI ...`). */
export interface VxlanCreateOptions {
  /** VXLAN network identifier. */
  vni: number;
  /** UDP destination port; 0/absent = kernel default (8472). */
  port?: number;
  /** Local (source) IP of the tunnel. */
  local?: string;
  /** Underlay device. */
  dev?: LinkRef;
  /** Learn remote MACs from traffic (flannel: off). */
  learning?: boolean;
  /** Group Based Policy extension. */
  gbp?: boolean;
  /** MTU in bytes. */
  mtu?: number;
  /** MAC address of the device (the VTEP MAC peers put in their ARP and FDB entries). */
  mac?: Mac;
}

/** Parameters for {@link NetlinkHandle.createVeth}. */
export interface VethCreateOptions {
  /** Create the peer directly in this namespace. */
  peerNetns?: NetnsRef;
  /** MTU of both ends. */
  mtu?: number;
  /** MAC address of the first end. */
  mac?: string;
  /** MAC address of the peer end. */
  peerMac?: string;
  /** Transmit queue length of both ends (unset: the kernel's default, 1000). */
  txqlen?: number;
  /** Transmit queue length of the peer end alone (overrides `txqlen` for it). */
  peerTxqlen?: number;
}

/** Read/write access to the network objects of one network namespace. */
export interface NetlinkHandle {
  /** The namespace this handle works in (null: the one flanctl runs in). */
  readonly netns: NetnsRef | null;

  /** Every link (`ip link show`). */
  links(): LinkInfo[];
  /** The link, or null. */
  link(ref: LinkRef): LinkInfo | null;
  /** Every address, of one family or both (`ip addr show`). */
  addrs(family?: 4 | 6): AddrInfo[];
  /** Routes of all tables except local (unless `table` asks for it). */
  routes(opts?: { family?: 4 | 6; table?: number }): RouteInfo[];
  /** ARP/NDP entries, of one family or both (`ip neigh show`). */
  neighbours(family?: 4 | 6): NeighInfo[];
  /** Bridge FDB entries of every device (`bridge fdb show`). */
  fdb(): FdbInfo[];

  /** Creates a bridge (`ip link add NAME type bridge`). */
  createBridge(name: string, opts?: { mtu?: number; mac?: string }): void;
  /** Creates a VXLAN device (`ip link add NAME type vxlan id VNI ...`). */
  createVxlan(
    name: string,
    opts: VxlanCreateOptions,
  ): void;
  /**
   * Creates a veth pair; the peer is created directly in `peerNetns` when given. `txqlen` sets the
   * transmit queue length of both ends, `peerTxqlen` the peer's alone (the CNI bridge plugin's host end: 0,
   * as the reference's).
   */
  createVeth(
    name: string,
    peerName: string,
    opts?: VethCreateOptions,
  ): void;
  /**
   * Creates a kernel WireGuard device (`ip link add NAME type wireguard`); its key, port and peers are
   * set over generic netlink (wgkernel.ts). Without the module: NetlinkError, errno EOPNOTSUPP.
   */
  createWireguard(name: string, opts?: { mtu?: number }): void;
  /** Creates a dummy device. */
  createDummy(name: string, opts?: { mtu?: number; mac?: string }): void;
  /** Sets the link administratively up or down. */
  setUp(ref: LinkRef, up: boolean): void;
  /** Sets the MTU. */
  setMtu(ref: LinkRef, mtu: number): void;
  /** Sets the MAC address. */
  setMac(ref: LinkRef, mac: string): void;
  /** Enslaves to `master` (by name/index), or releases with null. */
  setMaster(ref: LinkRef, master: LinkRef | null): void;
  /** Turns hairpin mode of a bridge port on or off. */
  setHairpin(ref: LinkRef, on: boolean): void;
  /** Moves the link into another namespace (optionally renaming it). */
  moveToNetns(ref: LinkRef, netns: NetnsRef, newName?: string): void;
  /** Deletes the link. */
  deleteLink(ref: LinkRef): void;

  /**
   * Adds `cidr` (address with prefix, e.g. "10.244.1.1/24"). `broadcast: true` also sets the IPv4
   * broadcast address of the subnet (`ip addr add … brd +`) when the prefix is shorter than /31.
   */
  addAddr(
    ref: LinkRef,
    cidr: string,
    opts?: { scope?: "universe" | "link" | "host"; noprefixroute?: boolean; broadcast?: boolean },
  ): void;
  /** Deletes the address `cidr` (address with prefix). */
  delAddr(ref: LinkRef, cidr: string): void;

  /** Creates or replaces a route (`ip route replace`). */
  replaceRoute(r: RouteSpec): void;
  /** Deletes a route (`ip route del`). */
  deleteRoute(r: RouteDelSpec): void;

  /** Replaces a neighbour entry; default state permanent. */
  replaceNeigh(n: NeighSpec): void;
  /** Deletes a neighbour entry. */
  deleteNeigh(n: { dev: LinkRef; dst: string }): void;
  /** Replaces an FDB entry on a VXLAN device (`bridge fdb replace MAC dev DEV dst IP self permanent`). */
  replaceFdb(f: FdbSpec): void;
  /** Deletes an FDB entry (`bridge fdb del MAC dev DEV [dst IP] self`). */
  deleteFdb(f: FdbDelSpec): void;

  /**
   * Routes (one entry per next hop), filtered in the kernel where it can (strict dump checking: table,
   * output device) and again here; no RouteInfo objects are built. A device name that does not exist is a
   * NetlinkError ("Cannot find device"); an ifindex is passed to the kernel as it is.
   */
  scanRoutes(
    opts: { family?: 4 | 6; table?: number; dev?: LinkRef },
    each: (r: Readonly<RouteScanEntry>) => void,
  ): void;
  /** Neighbours of one device (kernel-filtered by NDA_IFINDEX), without NeighInfo objects. */
  scanNeighbours(opts: { family?: 4 | 6; dev: LinkRef }, each: (n: Readonly<NeighScanEntry>) => void): void;
  /** FDB entries of one device (kernel-filtered by ifindex), without FdbInfo objects. */
  scanFdb(dev: LinkRef, each: (f: Readonly<FdbScanEntry>) => void): void;

  /**
   * Every write of `writes`, pipelined: many requests in flight, the kernel's answers collected after.
   * Returns one slot per write, in order: null when it succeeded, else its error (named by the write's
   * operation, as the one-at-a-time method would throw it). A failed write never stops or hides the
   * others; what belongs together (a peer's entries) is the caller's to undo.
   */
  writeMany(writes: readonly NetlinkWrite[]): (Error | null)[];

  /**
   * True when TX checksum offload is on for the device (`ethtool -k NAME`: tx-checksumming; on a VXLAN
   * device that is tx-checksum-ip-generic).
   */
  txChecksum(name: string): boolean;
  /** Switches TX checksum offload of the device on or off (`ethtool -K NAME tx on|off`). */
  setTxChecksum(name: string, on: boolean): void;

  /** Releases the socket and every libnl object held. Idempotent. */
  close(): void;
}
