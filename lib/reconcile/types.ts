/**
 * The desired kernel state of one peer, as the backends compute it from a lease and the reconciler
 * programs it. Plain (branded) strings only: 5,000 of these must stay small.
 * @module
 */
import type { Cidr, Ip, Mac } from "../base/cidr.ts";
import type { FdbSpec } from "../netlink/types.ts";

/** The route to a peer's subnet. */
export interface DesiredRoute {
  /** The peer subnet, e.g. "10.244.2.0/24". */
  dst: Cidr;
  /** Next hop: the peer subnet's network address (vxlan) or the peer's public IP (DirectRouting, host-gw). */
  via: Ip;
  /** Output device name: the VXLAN device or the underlay interface. */
  dev: string;
  /** True for the vxlan route (next hop is not on a connected subnet). */
  onlink: boolean;
}

/** Everything the kernel must hold for one peer. */
export interface DesiredPeer {
  route: DesiredRoute;
  /** Permanent ARP entry on the overlay device: peer subnet address → peer VTEP MAC (vxlan only). */
  neigh: { ip: Ip; mac: Mac } | null;
  /** Permanent FDB entry on the overlay device: peer VTEP MAC → peer public IP (vxlan only). */
  fdb: Omit<FdbSpec, "dev"> | null;
}

/** True when both describe the same kernel entries. */
export function samePeer(a: DesiredPeer, b: DesiredPeer): boolean {
  return a.route.dst === b.route.dst && a.route.via === b.route.via && a.route.dev === b.route.dev &&
    a.route.onlink === b.route.onlink &&
    (a.neigh?.ip ?? null) === (b.neigh?.ip ?? null) && (a.neigh?.mac ?? null) === (b.neigh?.mac ?? null) &&
    (a.fdb?.mac ?? null) === (b.fdb?.mac ?? null) && (a.fdb?.dst ?? null) === (b.fdb?.dst ?? null);
}
