/**
 * One address family of the daemon's data plane. A lease carries both families (`Subnet`/`PublicIP`/
 * `BackendData` and `IPv6Subnet`/`PublicIPv6`/`BackendV6Data`); {@link peerView} gives the one-family view
 * the backends and the reconciler work with, so the IPv6 half runs the same backend code on its own device
 * (flannel-v6.<VNI>) or routes. {@link FamilyPlane} is the IPv6 half of a dual-stack node: its backend, its
 * reconciler (IPv6 routes/NDP/FDB only) and its peers, fed from the same store events as the IPv4 half.
 * @module
 */
import type { IPNet } from "../base/cidr.ts";
import type { NetlinkHandle } from "../netlink/types.ts";
import type { Lease, LeaseEvent } from "../store/types.ts";
import type { Backend, PeerInfo } from "../backend/types.ts";
import type { RejectionReporter } from "../reconcile/peer_guard.ts";
import { PeerGate } from "./peer_gate.ts";
import { type PassResult, Reconciler, type ReconcileStats } from "../reconcile/reconciler.ts";
import type { DesiredPeer } from "../reconcile/types.ts";
import type { Log } from "../base/log.ts";

export { peerView, subnetOf } from "./peer_gate.ts";

/** Options of {@link FamilyPlane}. */
export interface FamilyPlaneOptions {
  nl: NetlinkHandle;
  family: 4 | 6;
  /** The family's cluster network (Network or IPv6Network). */
  network: IPNet;
  /** The family's node subnet length (IPv6SubnetLen), or null: that of our own subnet (kube). */
  subnetLen: number | null;
  backend: Backend;
  /** Our addresses of this family (public and interface address: a lease with one is never a peer). */
  ownIPs: readonly string[];
  log: Pick<Log, "info" | "warn" | "debug">;
  stats: ReconcileStats;
  /** Counts and reports refused peers (shared with the main family). */
  reporter: RejectionReporter;
  /** Told of another lease claiming our subnet of this family. */
  onOwnSubnetClaimed?: (p: PeerInfo, id: string) => void;
}

/** The kernel state of one address family: device, peers, reconciler. */
export class FamilyPlane {
  readonly family: 4 | 6;
  readonly network: IPNet;
  readonly backend: Backend;
  readonly reconciler: Reconciler;
  readonly #o: FamilyPlaneOptions;
  readonly #log: Pick<Log, "info" | "warn" | "debug">;
  /** The peer leases, checked (created with our subnet, in {@link setOwn}). */
  #gate: PeerGate | null = null;
  #own: IPNet | null = null;

  constructor(o: FamilyPlaneOptions) {
    this.#o = o;
    this.family = o.family;
    this.network = o.network;
    this.backend = o.backend;
    this.#log = o.log;
    this.reconciler = new Reconciler({
      nl: o.nl,
      network: o.network,
      overlayDev: o.backend.overlayDev,
      log: o.log,
      stats: o.stats,
    });
  }

  /** Our subnet of this family (after {@link setOwn}). */
  get own(): IPNet {
    if (!this.#own) throw new Error(`no IPv${this.family} subnet set`);
    return this.#own;
  }

  /** Number of peers programmed. */
  get size(): number {
    return this.reconciler.size;
  }

  /** Sets (or changes) our subnet; a peer entry for it is dropped and every lease is checked again. */
  setOwn(s: IPNet): void {
    this.#own = s;
    this.reconciler.setOwnSubnet(s);
    if (this.#gate) this.#gate.setOwn(s);
    else {
      const o = this.#o;
      this.#gate = new PeerGate({
        family: o.family,
        network: o.network,
        subnetLen: o.subnetLen,
        ownIPs: o.ownIPs,
        backend: o.backend,
        reporter: o.reporter,
        onOwnSubnetClaimed: o.onOwnSubnetClaimed,
      }, s);
    }
    this.reconciler.setPeer(s.toString(), null);
  }

  #need(): PeerGate {
    if (!this.#gate) throw new Error(`no IPv${this.family} subnet set`);
    return this.#gate;
  }

  /** Creates or repairs the device; returns what changed. */
  ensureDevice(): string[] {
    return this.backend.ensure(this.own);
  }

  /** Replaces the peer set with the leases of a full listing (`isOwn`: our own lease record). */
  reset(leases: Lease[], isOwn: (l: Lease) => boolean = () => false): void {
    this.#need().reset(leases, isOwn);
  }

  /** One full reconcile of this family's entries against the peers accepted. */
  fullPass(): PassResult {
    const g = this.#need();
    const r = this.reconciler.fullPass(() => {
      const m = new Map<string, DesiredPeer>();
      for (const [k, p] of g.entries()) {
        const d = g.desired(k, p, this.reconciler.reach);
        if (d) m.set(k, d);
      }
      return m;
    });
    this.#syncBackendPeers();
    return r;
  }

  /** Hands this family's accepted peers to a backend with a userspace part (wireguard's IPv6 device). */
  #syncBackendPeers(): void {
    if (!this.backend.syncPeers || !this.#gate) return;
    const accepted: PeerInfo[] = [];
    for (const [k, p] of this.#gate.entries()) if (this.reconciler.desired(k)) accepted.push(p);
    this.backend.syncPeers(accepted);
  }

  /** Applies one store event of another node's lease at once (add/change/remove a peer). */
  apply(ev: LeaseEvent): void {
    const g = this.#need();
    for (const key of g.apply(ev)) {
      const before = this.reconciler.desired(key);
      const p = g.accepted(key);
      const d = p ? g.desired(key, p, this.reconciler.reach) : null;
      if (!p) g.dropSkip(key);
      const ok = this.reconciler.setPeer(key, d);
      const family = `ipv${this.family}`;
      if (d && !before) this.#log.info("peer added", { family, subnet: key, public_ip: p!.publicIP, ok });
      else if (!d && before && !p) this.#log.info("peer removed", { family, subnet: key });
    }
    this.#syncBackendPeers();
  }
}
