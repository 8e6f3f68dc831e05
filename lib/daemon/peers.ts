/**
 * The peers of the node's main family: the leases of other nodes, checked by a {@link PeerGate} (nothing a
 * refused lease says is programmed), what the backend makes of each accepted one ({@link Peers.fullPass}
 * reconciles the whole set, {@link Peers.apply} one batch of store events), and the IPv6 half of a
 * dual-stack node fed from the same leases and events. Our own lease record, seen with attributes that are
 * not ours (another writer claims our subnet), goes to the handler given to {@link Peers.onOwnClaimed}.
 * @module
 */
import { IPAddr, type IPNet } from "../base/cidr.ts";
import type { Lease, LeaseEvent } from "../store/types.ts";
import { vtepMacOf } from "../lease/backend_data.ts";
import type { Backend, ExternalIface, PeerInfo } from "../backend/types.ts";
import type { Reconciler } from "../reconcile/reconciler.ts";
import type { RejectionReporter } from "../reconcile/peer_guard.ts";
import { type DesiredPeer, samePeer } from "../reconcile/types.ts";
import type { FamilyPlane } from "./family.ts";
import { leaseId, PeerGate } from "./peer_gate.ts";
import type { Logger } from "../base/log.ts";
import type { MemoryRelease } from "./memory.ts";
import type { Metrics } from "./metrics.ts";

/** What {@link Peers} works with. */
export interface PeersOptions {
  log: Logger;
  metrics: Metrics;
  family: 4 | 6;
  network: IPNet;
  /** The node subnet prefix length of the family, or null: that of our own subnet (kube: the podCIDR's). */
  subnetLen: number | null;
  ext: ExternalIface;
  backend: Backend;
  reconciler: Reconciler;
  v6: FamilyPlane | null;
  /** Counts and reports refused peers (shared with the IPv6 half). */
  reporter: RejectionReporter;
  /** Our lease and subnet (read at every use: a renewal or re-acquire replaces them). */
  state: { readonly own: IPNet; readonly lease: Lease };
  /** Told after each full pass and batch of events (gives memory back after bursts). */
  memory?: MemoryRelease;
}

/** Our addresses of `family` on the underlay (the public IP and the interface's own). */
export function ownIPs(ext: ExternalIface, family: 4 | 6): string[] {
  const l = family === 4 ? [ext.publicIP, ext.ifaceIP] : [ext.publicIPv6, ext.ifaceIPv6];
  return l.filter((x): x is string => !!x);
}

/**
 * How `seen` (our own lease record as the store has it now) differs from `ours` in what steers traffic to
 * us: the PublicIP and VtepMAC of each family we run. Null when it does not.
 */
export function claimOf(
  seen: Lease,
  ours: Lease,
  families: { v4: boolean; v6: boolean },
): { publicIP: string; what: string } | null {
  const a = seen.attrs, b = ours.attrs;
  if (families.v4 && a.PublicIP !== b.PublicIP) return { publicIP: a.PublicIP, what: "PublicIP" };
  if (families.v6 && (a.PublicIPv6 ?? "") !== (b.PublicIPv6 ?? "")) {
    return { publicIP: a.PublicIPv6 ?? "", what: "PublicIPv6" };
  }
  const mac = (x: unknown, y: unknown) =>
    vtepMacOf(x) !== null && vtepMacOf(y) !== null && vtepMacOf(x) !== vtepMacOf(y);
  if (families.v4 && mac(a.BackendData, b.BackendData)) return { publicIP: a.PublicIP, what: "VtepMAC" };
  if (families.v6 && mac(a.BackendV6Data, b.BackendV6Data)) {
    return { publicIP: a.PublicIPv6 ?? "", what: "IPv6 VtepMAC" };
  }
  return null;
}

/** The peer set of the node. */
export class Peers {
  readonly #o: PeersOptions;
  readonly #gate: PeerGate;
  /** Told when our own lease record shows another writer's attributes (the run loop writes ours back). */
  #onOwnClaimed: ((seen: Lease) => void) | null = null;
  /** A claim seen before anyone listened (the start-up listing): handed over by {@link onOwnClaimed}. */
  #pendingClaim: Lease | null = null;

  constructor(o: PeersOptions) {
    this.#o = o;
    this.#gate = new PeerGate({
      family: o.family,
      network: o.network,
      subnetLen: o.subnetLen,
      ownIPs: ownIPs(o.ext, o.family),
      backend: o.backend,
      reporter: o.reporter,
      onOwnSubnetClaimed: (p, id) => this.ownSubnetClaimed(p, id),
    }, o.state.own);
  }

  /** Who writes our lease back after a claim (the run loop); a claim seen before is handed over at once. */
  onOwnClaimed(fn: (seen: Lease) => void): void {
    this.#onOwnClaimed = fn;
    const l = this.#pendingClaim;
    this.#pendingClaim = null;
    if (l) fn(l);
  }

  /** Number of leases known, ours included. */
  get leases(): number {
    return this.#gate.leases + 1;
  }

  /** True for our own lease record (the same etcd key / lease file, or our Node). */
  #isOwn = (l: Lease): boolean => leaseId(l) === leaseId(this.#o.state.lease);

  /**
   * Another lease claims our subnet (a different record: refused as a peer; ours is intact): said loudly
   * and counted, with the claimant for doctor (flanctl_own_subnet_last_claim_timestamp_seconds).
   */
  ownSubnetClaimed(p: PeerInfo, id: string): void {
    const { log, metrics } = this.#o;
    metrics.ownSubnetClaims++;
    const ip = IPAddr.tryParse(p.publicIP);
    if (ip) metrics.lastClaim = { publicIP: ip.toString(), at: Date.now() };
    log.error("another lease claims our subnet: refused as a peer", {
      subnet: p.subnet.toString(),
      lease: id,
      claimant_public_ip: p.publicIP,
    });
  }

  /** Our own record as listed or watched: another writer's attributes in it are a claim. */
  #checkOwn(l: Lease): void {
    const { state, metrics, log, v6, family } = this.#o;
    const c = claimOf(l, state.lease, { v4: family === 4, v6: family === 6 || v6 !== null });
    if (!c) return;
    metrics.ownSubnetClaims++;
    const ip = IPAddr.tryParse(c.publicIP);
    if (ip) metrics.lastClaim = { publicIP: ip.toString(), at: Date.now() };
    log.error("our lease was overwritten: another writer claims our subnet; writing ours back", {
      subnet: state.own.toString(),
      changed: c.what,
      claimant_public_ip: c.publicIP,
    });
    if (this.#onOwnClaimed) this.#onOwnClaimed(l);
    else this.#pendingClaim = l;
  }

  /** Replaces the peer set (both families) with the leases of a full listing. */
  reset(leases: readonly Lease[]): void {
    this.#gate.reset(leases, this.#isOwn);
    this.#o.v6?.reset([...leases], this.#isOwn);
    this.#o.backend.leasesListed?.(leases.filter((l) => !this.#isOwn(l)));
    const own = leases.find(this.#isOwn);
    if (own) this.#checkOwn(own);
  }

  /** Our subnet changed (a re-acquire gave `s`): its peer entry goes, every lease is checked again. */
  forget(s: IPNet): void {
    this.#gate.setOwn(s);
    this.#o.reconciler.setPeer(s.toString(), null);
  }

  /** One full reconcile of both families against the peers accepted. */
  fullPass(): void {
    const { reconciler, metrics, log, v6, reporter } = this.#o;
    this.#o.memory?.releasePending();
    reporter.flush();
    const t0 = performance.now();
    const r = reconciler.fullPass(() => {
      const m = new Map<string, DesiredPeer>();
      for (const [k, p] of this.#gate.entries()) {
        const d = this.#gate.desired(k, p, reconciler.reach);
        if (!d) continue;
        // The entry already desired when unchanged: the new one dies young instead of being promoted with
        // the map (a fresh copy of every peer per pass grew the old generation).
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
    for (const [k, p] of this.#gate.entries()) if (reconciler.desired(k)) accepted.push(p);
    backend.syncPeers(accepted);
  }

  /** Programs (or removes) the accepted peer of subnet `key` after an event. */
  #sync(key: string): void {
    const { reconciler, log } = this.#o;
    const before = reconciler.desired(key);
    const p = this.#gate.accepted(key);
    if (!p) this.#gate.dropSkip(key);
    const d = p ? this.#gate.desired(key, p, reconciler.reach) : null;
    const ok = reconciler.setPeer(key, d);
    if (d && !before) log.info("peer added", { subnet: key, public_ip: p!.publicIP, ok });
    else if (d && before && !samePeer(before, d)) {
      log.info("peer changed", { subnet: key, public_ip: p!.publicIP, ok });
    } else if (!d && before && !p) {
      log.info("peer removed", { subnet: key, public_ip: before.fdb?.dst ?? before.route.via });
    }
  }

  /** Applies one batch of store events; `onOwnRemoved` gets a `removed` event of our own lease. */
  apply(events: readonly LeaseEvent[], onOwnRemoved: (l: Lease) => void): void {
    const { metrics, log, v6, reconciler } = this.#o;
    const t0 = performance.now();
    for (const ev of events) {
      metrics.events++;
      const l = ev.lease;
      if (this.#isOwn(l)) {
        if (ev.type === "removed") onOwnRemoved(l);
        else this.#checkOwn(l);
        continue;
      }
      v6?.apply(ev); // the IPv6 half of a dual-stack node
      this.#o.backend.leaseEvent?.(ev); // extension: its commands
      for (const key of this.#gate.apply(ev)) this.#sync(key);
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
