/**
 * The store interface every subnet-lease engine implements (file, etcd v3, Kubernetes API); the lease
 * shapes themselves live in lib/lease/types.ts (re-exported here). The daemon, `flanctl lease` and the
 * doctor see only this.
 * @module
 */
import type { IPNet } from "../ip/cidr.ts";
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
  /** Adds a reservation (no TTL) for `subnet` owned by `publicIP`. */
  reserve(subnet: IPNet, publicIP: string): Promise<void>;
  /** All current leases (malformed foreign entries skipped with a warning) and a cursor to watch from. */
  listLeases(): Promise<{ leases: Lease[]; cursor: string }>;
  /**
   * Events after `cursor`, batched; ends when `signal` aborts. After a compaction/410 the store re-lists
   * and yields the differences, so watchers never miss a removal.
   */
  watchLeases(cursor: string, signal: AbortSignal): AsyncIterable<LeaseEvent[]>;
  /** Releases connections/timers. Idempotent. */
  close(): Promise<void>;
}
