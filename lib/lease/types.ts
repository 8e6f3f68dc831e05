/**
 * Subnet leases as every layer sees them: the attributes on the wire (flannel's JSON), the lease, watch
 * events, the `-o json` view and the acquire options. A leaf: it imports nothing of the stores, so
 * lib/store depends on lib/lease and never the other way round (flannel's pkg/lease ← pkg/subnet).
 * @module
 */
import type { IPNet } from "../base/cidr.ts";

/** Lease attributes exactly as flannel serialises them in etcd (key order kept). */
export interface LeaseAttrsWire {
  /** The node's public IPv4 ("0.0.0.0" in an IPv6-only network). */
  PublicIP: string;
  /** The node's public IPv6, or null. */
  PublicIPv6?: string | null;
  /** The backend: "vxlan", "host-gw", "" for udp and reservations. */
  BackendType: string;
  /** The backend's data for the IPv4 family (vxlan: `{"VNI":1,"VtepMAC":"…"}`). */
  BackendData?: unknown;
  /** The backend's data for the IPv6 family. */
  BackendV6Data?: unknown;
}

/** A subnet lease. */
export interface Lease {
  /** The node's IPv4 subnet (null in IPv6-only networks). */
  subnet: IPNet | null;
  /** The node's IPv6 subnet, when dual stack / IPv6. */
  ipv6Subnet: IPNet | null;
  /** The attributes as flannel writes them. */
  attrs: LeaseAttrsWire;
  /** When the lease expires; null for reservations (no TTL). */
  expiration: Date | null;
  /** Store-specific revision/version of this lease (etcd mod revision, k8s resourceVersion, file seq). */
  revision?: string;
  /**
   * When the lease was first written, in the store's own order (etcd: the key's create revision; kube: the
   * Node's creationTimestamp in ms; file store: the sequence number of the lease file's first write). Of two
   * leases claiming one subnet the older is the peer (lib/reconcile/peer_guard.ts).
   */
  created?: number;
  /** kube only: the Node that publishes the lease (its identity; other stores' leases are their key). */
  node?: string;
}

/** A change seen by a watcher. */
export type LeaseEvent =
  | { type: "added"; lease: Lease }
  | { type: "removed"; lease: Lease };

/** The `-o json` shape of `flanctl lease list`. */
export interface LeaseJson {
  /** The IPv4 subnet, the IPv6 one, or both comma-separated (dual stack). */
  subnet: string;
  /** PublicIP (PublicIPv6 in an IPv6-only network). */
  publicIP: string;
  /** BackendType ("vxlan", "host-gw", "" for udp). */
  backendType: string;
  /** BackendData (the IPv4 backend's; BackendV6Data in an IPv6-only network). */
  backendData: unknown;
  /** Null: no expiry (an etcd/file reservation, or any kube lease: it lives as long as its Node). */
  expiration: string | null;
  /** PublicIPv6, or null. */
  publicIPv6: string | null;
  /** BackendV6Data (dual stack and IPv6-only: the IPv6 backend's data), or null. */
  backendV6Data: unknown;
  /** The Kubernetes Node of a kube lease, else null. */
  node: string | null;
}

/** One line of `flanctl lease watch -o json`: the change and the lease as `lease list` shows it. */
export interface LeaseEventJson {
  /** Whether the lease appeared (or changed) or went away. */
  type: "added" | "removed";
  /** The lease, as `lease list -o json` shows it. */
  lease: LeaseJson;
}

/** Options for acquiring a lease. */
export interface AcquireOptions {
  /** FLANNEL_SUBNET from a previous subnet.env, tried after "our own PublicIP". */
  previousSubnet?: IPNet | null;
  /** FLANNEL_IPV6_SUBNET from a previous subnet.env, tried the same way. */
  previousIPv6Subnet?: IPNet | null;
}
