/**
 * The store interface every subnet-lease engine implements (file, etcd v3, Kubernetes API); the lease
 * shapes themselves live in lib/lease/types.ts (re-exported here). The daemon, `flanctl lease` and the
 * doctor see only this.
 * @module
 */
import type { ReservationV6 } from "../lease/reservation.ts";
import type { IPNet } from "../base/cidr.ts";
import type { NetConfig } from "../config/types.ts";

export type {
  AcquireOptions,
  Lease,
  LeaseAttrsWire,
  LeaseEvent,
  LeaseEventJson,
  LeaseJson,
} from "../lease/types.ts";
import type { AcquireOptions, Lease, LeaseAttrsWire, LeaseEvent } from "../lease/types.ts";

/** A subnet-lease store. */
export interface SubnetStore {
  /** Human-readable kind: "file", "etcd", "kube". */
  readonly kind: string;
  /** Reads and parses the network config (throws ConfigError naming the field). */
  getNetworkConfig(): Promise<NetConfig>;
  /** Writes the network config (JSON text, validated first). Not supported by every store. */
  setNetworkConfig(json: string): Promise<void>;
  /** Acquires (or re-takes) a lease for a node with these attributes. Throws "out of subnets". */
  acquireLease(attrs: LeaseAttrsWire, opts?: AcquireOptions): Promise<Lease>;
  /** Extends a lease's TTL; returns it with the new expiration. */
  renewLease(lease: Lease): Promise<Lease>;
  /** Removes a lease (or reservation). */
  revokeLease(subnet: IPNet): Promise<void>;
  /**
   * Adds a reservation (no TTL) for `subnet` owned by `publicIP`; in a dual-stack network with the IPv6
   * half `v6` (one key `v4&v6`, see lib/lease/reservation.ts).
   */
  reserve(subnet: IPNet, publicIP: string, v6?: ReservationV6): Promise<void>;
  /**
   * Writes our lease back after its record was overwritten with other attributes (another writer claimed our
   * subnet), as a compare-and-swap against the record as it is now (etcd: its mod revision; kube: the Node's
   * resourceVersion; file store: under the store's lock). Returns our lease as written.
   */
  reclaimLease?(lease: Lease): Promise<Lease>;
  /** All current leases (malformed foreign entries skipped with a warning) and a cursor to watch from. */
  listLeases(): Promise<{ leases: Lease[]; cursor: string }>;
  /**
   * kube only: our node's name (env NODE_NAME, the pod POD_NAMESPACE/POD_NAME's spec.nodeName, --node-name).
   * A pod that does not exist or has no nodeName is not retried (flanneld exits 1 at once).
   */
  nodeName?(): Promise<string>;
  /**
   * kube only (flanneld's GetStoredPublicIP): the `node-public-ip`/`node-public-ipv6` annotations of our
   * node, which act as --public-ip/--public-ipv6. Other stores do not have it.
   */
  storedPublicIP?(): Promise<{ publicIP: string | null; publicIPv6: string | null }>;
  /**
   * kube only: our node's own published BackendData (family 6: BackendV6Data), to restore the VTEP MAC when
   * the state file is gone.
   */
  storedBackendData?(family?: 4 | 6): Promise<unknown>;
  /**
   * kube only (flanneld's CompleteLease): called once the backend device, subnet.env and the rules are in
   * place; sets the node's NetworkUnavailable condition to False (reason FlannelIsUp).
   */
  completeLease?(): Promise<void>;
  /**
   * Events after `cursor`, batched; ends when `signal` aborts. After a compaction/410 the store re-lists
   * and yields the differences, so watchers never miss a removal.
   */
  watchLeases(cursor: string, signal: AbortSignal): AsyncIterable<LeaseEvent[]>;
  /** Releases connections/timers. Idempotent. */
  close(): Promise<void>;
}
