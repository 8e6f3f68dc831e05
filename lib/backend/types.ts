/**
 * The interface between the daemon and a backend (vxlan, host-gw). A backend owns its device (if any),
 * says what MTU pods get and what goes into the lease's BackendData, and turns a peer's lease into the
 * kernel entries the reconciler programs.
 * @module
 */
import type { IPNet } from "../base/cidr.ts";
import type { DesiredPeer } from "../reconcile/types.ts";
import type { UnderlayRoute } from "../base/route_lookup.ts";
import type { Lease, LeaseAttrsWire, LeaseEvent } from "../lease/types.ts";

/** What the daemon knows about a peer, from its lease. Strings only: kept for every peer. */
export interface PeerInfo {
  /** The peer subnet. */
  subnet: IPNet;
  publicIP: string;
  backendType: string;
  backendData: unknown;
}

/** Looks up the underlay route the kernel would use for an IP. */
export type ReachFn = (ip: string) => UnderlayRoute | null;

/** The external (underlay) interface the daemon runs on. */
export interface ExternalIface {
  name: string;
  index: number;
  mtu: number;
  /** The interface's own IPv4 address. */
  ifaceIP: string;
  /** The public IP announced in the lease (--public-ip, else ifaceIP). */
  publicIP: string;
  /** The interface's own IPv6 address (when the network has IPv6), else null/absent. */
  ifaceIPv6?: string | null;
  /** The public IPv6 announced in the lease (--public-ipv6, else ifaceIPv6), else null/absent. */
  publicIPv6?: string | null;
}

/** A backend. */
export interface Backend {
  /** The backend's name: "vxlan", "host-gw", "udp", "alloc" or "extension". */
  readonly type: string;
  /** The lease's BackendType when it differs from {@link type} (udp: "", as flannel writes it). */
  readonly leaseBackendType?: string;
  /** The overlay device name, or null when the backend has none. */
  readonly overlayDev: string | null;
  /** The MTU for pods (FLANNEL_MTU). */
  readonly mtu: number;
  /**
   * Reads what exists (persisted VTEP MAC, an existing device) without changing the kernel (extension:
   * runs PreStartupCommand, whose output is the BackendData).
   */
  prepare(): void | Promise<void>;
  /** The lease's BackendData (valid after {@link prepare}). */
  backendData(): unknown;
  /**
   * Creates or repairs the backend's device for our subnet (idempotent). Returns what was changed
   * ("created", "recreated: vni differs", "address", "up", "mtu", "mac"); empty when nothing was.
   */
  ensure(own: IPNet): string[];
  /**
   * The kernel entries for one peer, a string saying why the peer is skipped, or null: a backend without a
   * data plane (alloc, extension) programs nothing for any peer.
   */
  peer(p: PeerInfo, reach: ReachFn): DesiredPeer | string | null;
  /** Our lease's attributes as this backend's flanneld writes them, from the daemon's defaults. */
  leaseAttrs?(a: LeaseAttrsWire): LeaseAttrsWire;
  /** Our lease is taken (extension: PostStartupCommand); a throw stops the start. */
  leased?(l: Lease): Promise<void>;
  /** Lease-event backends (extension): a full listing of the other nodes' leases. */
  leasesListed?(others: readonly Lease[]): void;
  /** Lease-event backends (extension): one watched event of another node's lease. */
  leaseEvent?(ev: LeaseEvent): void;
  /** Userspace data paths (udp): the peers the daemon accepted, after every change. */
  syncPeers?(peers: readonly PeerInfo[]): void;
  /** Extra Prometheus lines for /metrics. */
  metricLines?(): string[];
  /** Userspace devices (wireguard): waits for the configuration ensure() started; throws its failure. */
  settle?(): Promise<void>;
  /** Stops what the backend runs (workers, descriptors); kernel state stays. */
  close?(): Promise<void>;
}
