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
import { type PassResult, Reconciler, type ReconcileStats } from "../reconcile/reconciler.ts";
import type { DesiredPeer } from "../reconcile/types.ts";
import type { Log } from "../base/log.ts";

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

/** Options of {@link FamilyPlane}. */
export interface FamilyPlaneOptions {
  nl: NetlinkHandle;
  family: 4 | 6;
  /** The family's cluster network (Network or IPv6Network). */
  network: IPNet;
  backend: Backend;
  /** Our public address of this family (a lease with it is a stale one of ours, never a peer). */
  ownPublicIP: string;
  log: Pick<Log, "info" | "warn" | "debug">;
  stats: ReconcileStats;
}

/** The kernel state of one address family: device, peers, reconciler. */
export class FamilyPlane {
  readonly family: 4 | 6;
  readonly network: IPNet;
  readonly backend: Backend;
  readonly reconciler: Reconciler;
  readonly #ownPublicIP: string;
  readonly #log: Pick<Log, "info" | "warn" | "debug">;
  /** Peers by subnet text. */
  readonly #peers = new Map<string, PeerInfo>();
  /** Why a peer is skipped (logged once per reason). */
  readonly #skipped = new Map<string, string>();
  #own: IPNet | null = null;

  constructor(o: FamilyPlaneOptions) {
    this.family = o.family;
    this.network = o.network;
    this.backend = o.backend;
    this.#ownPublicIP = o.ownPublicIP;
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

  /** Sets (or changes) our subnet; a peer entry for it is dropped. */
  setOwn(s: IPNet): void {
    this.#own = s;
    this.reconciler.setOwnSubnet(s);
    if (this.#peers.delete(s.toString())) this.reconciler.setPeer(s.toString(), null);
  }

  /** Creates or repairs the device; returns what changed. */
  ensureDevice(): string[] {
    return this.backend.ensure(this.own);
  }

  /** Replaces the peer set with the leases of a full listing. */
  reset(leases: Lease[]): void {
    this.#peers.clear();
    for (const l of leases) this.#remember(l);
  }

  #remember(l: Lease): string | null {
    const p = peerView(l, this.family);
    if (!p || (this.#own && p.subnet.equals(this.#own))) return null;
    const key = p.subnet.toString();
    this.#peers.set(key, p);
    return key;
  }

  #desired(key: string, p: PeerInfo): DesiredPeer | null {
    let d: DesiredPeer | string;
    if (!this.network.contains(p.subnet)) {
      d = `its subnet is outside the IPv${this.family} network ${this.network}`;
    } else if (p.publicIP === this.#ownPublicIP) d = "it has our own public IP (a stale lease of this node?)";
    else d = this.backend.peer(p, this.reconciler.reach);
    if (typeof d === "string") {
      if (this.#skipped.get(key) !== d) {
        this.#skipped.set(key, d);
        this.#log.warn("skipping peer", {
          family: `ipv${this.family}`,
          subnet: key,
          public_ip: p.publicIP,
          reason: d,
        });
      }
      return null;
    }
    this.#skipped.delete(key);
    return d;
  }

  /** One full reconcile of this family's entries against the peers known. */
  fullPass(): PassResult {
    return this.reconciler.fullPass(() => {
      const m = new Map<string, DesiredPeer>();
      for (const [k, p] of this.#peers) {
        const d = this.#desired(k, p);
        if (d) m.set(k, d);
      }
      return m;
    });
  }

  /** Applies one store event at once (add/change/remove a peer). */
  apply(ev: LeaseEvent): void {
    const p = peerView(ev.lease, this.family);
    if (!p || (this.#own && p.subnet.equals(this.#own))) return;
    const key = p.subnet.toString();
    if (ev.type === "added") {
      const isNew = !this.#peers.has(key);
      this.#remember(ev.lease);
      const d = this.#desired(key, p);
      const ok = this.reconciler.setPeer(key, d);
      if (isNew && d) {
        this.#log.info("peer added", { family: `ipv${this.family}`, subnet: key, public_ip: p.publicIP, ok });
      }
    } else {
      if (!this.#peers.delete(key)) return;
      this.#skipped.delete(key);
      this.reconciler.setPeer(key, null);
      this.#log.info("peer removed", { family: `ipv${this.family}`, subnet: key, public_ip: p.publicIP });
    }
  }
}
