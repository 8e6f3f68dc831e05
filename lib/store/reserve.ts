/**
 * What the etcd and file stores' `reserve` do before they write: the reservation entry with its families
 * checked against the stored config, and which existing leases it replaces (its own subnets held by its own
 * public IP) or collides with (another node's: refused).
 * @module
 */
import type { IPNet } from "../base/cidr.ts";
import {
  checkReservationFamilies,
  type ReservationEntry,
  reservationEntry,
  type ReservationV6,
} from "../lease/reservation.ts";
import { NoNetworkConfigError, SubnetConflictError } from "./errors.ts";
import type { Lease, SubnetStore } from "./types.ts";

/** The reservation of `subnet` (and `v6`) for `publicIP`, refused when the stored config wants both families. */
export async function plannedReservation(
  store: Pick<SubnetStore, "getNetworkConfig">,
  subnet: IPNet,
  publicIP: string,
  v6?: ReservationV6,
): Promise<ReservationEntry> {
  const cfg = await store.getNetworkConfig().catch((e) => {
    if (e instanceof NoNetworkConfigError) return null;
    throw e;
  });
  checkReservationFamilies(cfg, subnet, v6);
  return reservationEntry(subnet, publicIP, v6);
}

/**
 * The keys of the leases `r` replaces: those overlapping one of its subnets, held by the same public IP.
 * Throws {@link SubnetConflictError} (before anything is deleted) when another node holds one.
 */
export function replacedLeases(r: ReservationEntry, leases: Iterable<readonly [string, Lease]>): string[] {
  const drop = new Set<string>();
  for (const [key, lease] of leases) {
    for (const [want, ip] of r.parts) {
      const s = want.family === 4 ? lease.subnet : lease.ipv6Subnet;
      const own = want.family === 4 ? lease.attrs.PublicIP : lease.attrs.PublicIPv6;
      if (!s?.overlaps(want)) continue;
      if (own !== ip) {
        throw new SubnetConflictError(`${want} overlaps lease ${key} of ${own}: revoke it first`);
      }
      drop.add(key);
    }
  }
  return [...drop];
}
