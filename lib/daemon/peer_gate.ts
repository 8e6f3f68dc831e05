/**
 * The one way a peer lease reaches a backend, for both halves of a node (the main family in
 * lib/daemon/peers.ts, the IPv6 half of a dual-stack node in lib/daemon/family.ts) and every store: leases
 * go into a {@link PeerGuard} (lib/reconcile/peer_guard.ts: the checks and which of two claimants of a
 * subnet wins), only what it accepts is handed to `backend.peer`, and every refusal — the guard's or the
 * backend's — is counted in `flanctl_rejected_peers_total` and warned about once (rate-limited).
 * @module
 */
import type { IPNet } from "../base/cidr.ts";
import { keyOf } from "../lease/wire.ts";
import type { Lease, LeaseEvent } from "../store/types.ts";
import type { Backend, PeerInfo, ReachFn } from "../backend/types.ts";
import type { DesiredPeer } from "../reconcile/types.ts";
import {
  type GuardRules,
  PeerGuard,
  type Rejection,
  type RejectionReporter,
} from "../reconcile/peer_guard.ts";

/** The lease's subnet of `family` (null when the lease has none). */
export function subnetOf(l: Pick<Lease, "subnet" | "ipv6Subnet">, family: 4 | 6): IPNet | null {
  return family === 4 ? l.subnet : l.ipv6Subnet;
}

/** The one-family view of a peer's lease, or null when the lease has no subnet of that family. */
export function peerView(l: Lease, family: 4 | 6): PeerInfo | null {
  const subnet = subnetOf(l, family);
  if (!subnet) return null;
  return family === 4
    ? {
      subnet,
      publicIP: l.attrs.PublicIP,
      backendType: l.attrs.BackendType,
      backendData: l.attrs.BackendData,
    }
    : {
      subnet,
      publicIP: l.attrs.PublicIPv6 ?? "",
      backendType: l.attrs.BackendType,
      backendData: l.attrs.BackendV6Data,
    };
}

/** A lease's identity in its store: the kube Node, else the subnet key (etcd key, file name). */
export function leaseId(l: Pick<Lease, "subnet" | "ipv6Subnet" | "node">): string {
  return l.node !== undefined ? `node ${l.node}` : keyOf(l);
}

/** What a {@link PeerGate} works with. */
export interface PeerGateOptions {
  family: 4 | 6;
  /** The family's cluster network (Network or IPv6Network). */
  network: IPNet;
  /** The node subnet prefix length (SubnetLen/IPv6SubnetLen), or null: that of our own subnet (kube). */
  subnetLen: number | null;
  /** Our own addresses of the family (public IP, interface address). */
  ownIPs: readonly string[];
  backend: Backend;
  reporter: RejectionReporter;
  /** Told of a lease that claims our own subnet (another record than ours). */
  onOwnSubnetClaimed?: (l: PeerInfo, id: string) => void;
  /** Told when a refused lease is accepted again. */
  onAccepted?: (id: string, p: PeerInfo) => void;
}

/** The peer leases of one family, checked, and the kernel entries of those accepted. */
export class PeerGate {
  readonly #o: PeerGateOptions;
  readonly #guard: PeerGuard<PeerInfo>;
  /** Why the backend skips an accepted peer, by subnet key (reported once per reason). */
  readonly #skipped = new Map<string, string>();

  constructor(o: PeerGateOptions, own: IPNet) {
    this.#o = o;
    this.#guard = new PeerGuard(this.#rules(own), (id, p, r) => this.#verdict(id, p, r));
  }

  #rules(own: IPNet): GuardRules {
    const o = this.#o;
    return { network: o.network, subnetLen: o.subnetLen ?? own.prefix, own, ownIPs: o.ownIPs };
  }

  #verdict(id: string, p: PeerInfo, r: Rejection | null): void {
    if (!r) {
      this.#o.onAccepted?.(id, p);
      return;
    }
    this.#o.reporter.reject(id, r, {
      family: `ipv${this.#o.family}`,
      subnet: p.subnet.toString(),
      public_ip: p.publicIP,
    });
    if (r.reason === "own_subnet" && p.subnet.equals(this.#guard.rules.own)) {
      this.#o.onOwnSubnetClaimed?.(p, id);
    }
  }

  /** Number of leases known (accepted or not). */
  get leases(): number {
    return this.#guard.leases;
  }

  /** Our subnet changed (a re-acquire): every lease is checked again. */
  setOwn(own: IPNet): void {
    this.#guard.setRules(this.#rules(own));
  }

  /** Replaces the leases with a full listing (`isOwn`: our own record, left out). */
  reset(leases: readonly Lease[], isOwn: (l: Lease) => boolean): void {
    const fam = this.#o.family;
    this.#guard.reset(leases.flatMap((l) => {
      const peer = isOwn(l) ? null : peerView(l, fam);
      return peer ? [{ id: leaseId(l), peer, created: l.created }] : [];
    }));
  }

  /** Applies one event of another node's lease; returns the subnet keys whose accepted peer may have changed. */
  apply(ev: LeaseEvent): string[] {
    const id = leaseId(ev.lease);
    if (ev.type === "removed") return this.#guard.remove(id);
    const peer = peerView(ev.lease, this.#o.family);
    return peer ? this.#guard.upsert(id, peer, ev.lease.created) : this.#guard.remove(id);
  }

  /** The accepted peer of subnet `key`, if any. */
  accepted(key: string): PeerInfo | undefined {
    return this.#guard.accepted(key);
  }

  /** Every accepted peer, by subnet key. */
  entries(): IterableIterator<[string, PeerInfo]> {
    return this.#guard.entries();
  }

  /** The backend's kernel entries for accepted peer `p`, or null when the backend skips it (reported once). */
  desired(key: string, p: PeerInfo, reach: ReachFn): DesiredPeer | null {
    const d = this.#o.backend.peer(p, reach);
    if (typeof d !== "string") {
      this.#skipped.delete(key);
      return d;
    }
    if (this.#skipped.get(key) !== d) {
      this.#skipped.set(key, d);
      this.#o.reporter.reject(key, { reason: "backend", detail: d }, {
        family: `ipv${this.#o.family}`,
        subnet: key,
        public_ip: p.publicIP,
      });
    }
    return null;
  }

  /** Forgets the backend's skip reason of `key` (its peer is gone). */
  dropSkip(key: string): void {
    this.#skipped.delete(key);
  }
}
