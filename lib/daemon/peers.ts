/**
 * The peers of the node's main family: the leases of other nodes, what the backend makes of each
 * ({@link Peers.fullPass} reconciles the whole set, {@link Peers.apply} one batch of store events), and the
 * IPv6 half of a dual-stack node fed from the same leases and events.
 * @module
 */
import type { IPNet } from "../base/cidr.ts";
import type { Lease, LeaseEvent } from "../store/types.ts";
import type { Backend, ExternalIface, PeerInfo } from "../backend/types.ts";
import type { Reconciler } from "../reconcile/reconciler.ts";
import { type DesiredPeer, samePeer } from "../reconcile/types.ts";
import { type FamilyPlane, peerView, subnetOf } from "./family.ts";
import type { Logger } from "../base/log.ts";
import type { MemoryRelease } from "./memory.ts";
import type { Metrics } from "./metrics.ts";

/** What {@link Peers} works with. */
export interface PeersOptions {
  log: Logger;
  metrics: Metrics;
  family: 4 | 6;
  network: IPNet;
  ext: ExternalIface;
  backend: Backend;
  reconciler: Reconciler;
  v6: FamilyPlane | null;
  /** Our own subnet (read at every use: a re-acquire may change it). */
  state: { readonly own: IPNet };
  /** Told after each full pass and batch of events (gives memory back after bursts). */
  memory?: MemoryRelease;
}

/** The peer set of the node. */
export class Peers {
  readonly #o: PeersOptions;
  /** Peers by subnet text. */
  readonly #peers = new Map<string, PeerInfo>();
  /** Why a peer is skipped (logged once per reason). */
  readonly #skipped = new Map<string, string>();

  constructor(o: PeersOptions) {
    this.#o = o;
  }

  /** Number of leases known, ours included. */
  get leases(): number {
    return this.#peers.size + 1;
  }

  /** Replaces the peer set (both families) with the leases of a full listing. */
  reset(leases: readonly Lease[]): void {
    this.#peers.clear();
    for (const l of leases) this.#remember(l);
    this.#o.v6?.reset([...leases]);
  }

  /** Forgets a peer entry for `s` (our new subnet after a re-acquire). */
  forget(s: IPNet): void {
    this.#peers.delete(s.toString());
    this.#o.reconciler.setPeer(s.toString(), null);
  }

  /** Records a lease from the store; returns the peer key when it is a peer. */
  #remember(l: Lease): string | null {
    const p = peerView(l, this.#o.family);
    if (!p) return null;
    const key = p.subnet.toString();
    if (p.subnet.equals(this.#o.state.own)) return null;
    this.#peers.set(key, p);
    return key;
  }

  #desired(key: string, p: PeerInfo): DesiredPeer | null {
    const { network, family, ext, backend, reconciler, log } = this.#o;
    let d: DesiredPeer | string;
    if (!network.contains(p.subnet)) d = `its subnet is outside the Network ${network}`;
    else if (p.publicIP === (family === 4 ? ext.publicIP : ext.publicIPv6)) {
      d = "it has our own public IP (a stale lease of this node?)";
    } else d = backend.peer(p, reconciler.reach);
    if (typeof d === "string") {
      if (this.#skipped.get(key) !== d) {
        this.#skipped.set(key, d);
        log.warn("skipping peer", { subnet: key, public_ip: p.publicIP, reason: d });
      }
      return null;
    }
    this.#skipped.delete(key);
    return d;
  }

  /** One full reconcile of both families against the peers known. */
  fullPass(): void {
    const { reconciler, metrics, log, v6 } = this.#o;
    this.#o.memory?.releasePending();
    const t0 = performance.now();
    const r = reconciler.fullPass(() => {
      const m = new Map<string, DesiredPeer>();
      for (const [k, p] of this.#peers) {
        const d = this.#desired(k, p);
        if (!d) continue;
        // The entry already desired when unchanged: the new one dies young instead of being promoted with
        // the map (a fresh copy of every peer per pass grew the old generation by ~2 MiB at 5,000 peers).
        const old = reconciler.desired(k);
        m.set(k, old && samePeer(old, d) ? old : d);
      }
      return m;
    });
    metrics.peers = reconciler.size;
    metrics.leases = this.leases;
    const fields = {
      peers: reconciler.size,
      programmed: r.programmed,
      removed: r.removed,
      errors: r.errors,
      ms: Math.round(performance.now() - t0),
    };
    this.#syncBackendPeers();
    this.#o.memory?.afterBurst();
    if (r.programmed || r.removed || r.errors) log.info("reconciled", fields);
    else log.debug("reconciled", fields);
    if (!v6) return;
    const r6 = v6.fullPass();
    const f6 = {
      family: "ipv6",
      peers: v6.size,
      programmed: r6.programmed,
      removed: r6.removed,
      errors: r6.errors,
    };
    if (r6.programmed || r6.removed || r6.errors) log.info("reconciled", f6);
    else log.debug("reconciled", f6);
  }

  /** Hands the accepted peers to a backend with a userspace data path (udp). */
  #syncBackendPeers(): void {
    const { backend, reconciler } = this.#o;
    if (!backend.syncPeers) return;
    const accepted: PeerInfo[] = [];
    for (const [k, p] of this.#peers) if (reconciler.desired(k)) accepted.push(p);
    backend.syncPeers(accepted);
  }

  /** Applies one batch of store events; `onOwnRemoved` gets a `removed` event of our own lease. */
  apply(events: readonly LeaseEvent[], onOwnRemoved: (l: Lease) => void): void {
    const { reconciler, metrics, log, v6, family } = this.#o;
    const t0 = performance.now();
    for (const ev of events) {
      metrics.events++;
      const l = ev.lease;
      v6?.apply(ev); // the IPv6 half of a dual-stack node (skips our own IPv6 subnet itself)
      const sn = subnetOf(l, family);
      if (!sn) continue;
      const key = sn.toString();
      if (sn.equals(this.#o.state.own)) {
        if (ev.type === "removed") onOwnRemoved(l);
        continue;
      }
      if (ev.type === "added") {
        const isNew = !this.#peers.has(key);
        const before = reconciler.desired(key);
        this.#remember(l);
        const d = this.#desired(key, this.#peers.get(key)!);
        const ok = reconciler.setPeer(key, d);
        if (isNew && d) log.info("peer added", { subnet: key, public_ip: l.attrs.PublicIP, ok });
        else if (!isNew && d && before && !samePeer(before, d)) {
          log.info("peer changed", { subnet: key, public_ip: l.attrs.PublicIP, ok });
        }
      } else {
        if (!this.#peers.delete(key)) continue;
        this.#skipped.delete(key);
        reconciler.setPeer(key, null);
        log.info("peer removed", { subnet: key, public_ip: l.attrs.PublicIP });
      }
    }
    metrics.peers = reconciler.size;
    metrics.leases = this.leases;
    this.#syncBackendPeers();
    this.#o.memory?.afterBurst();
    log.debug("applied store events", {
      events: events.length,
      ms: Math.round(performance.now() - t0),
    });
  }
}
