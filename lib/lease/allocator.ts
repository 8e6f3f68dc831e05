/**
 * The subnet allocator every store uses, so the file, etcd and kube stores pick subnets the same way as
 * flannel: (1) the lease already held by our PublicIP, (2) the previous subnet from subnet.env when it is
 * free and inside SubnetMin..SubnetMax, (3) a random pick among up to 100 free subnets from SubnetMin up.
 * "Free" means overlapping no lease or reservation of any size (an existing /23 blocks both /24s in it).
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import type { IPNet } from "../base/cidr.ts";
import type { NetConfig } from "../config/types.ts";
import type { AcquireOptions, Lease, LeaseAttrsWire } from "./types.ts";
import { subnetFitsConfig } from "../config/netconf.ts";

/** No free subnet is left between SubnetMin and SubnetMax. */
export class OutOfSubnetsError extends FlanctlError {
  constructor(detail: string) {
    super(`out of subnets: ${detail}`, 1);
  }
}

/** Number of free candidates the random pick chooses among (as flannel). */
export const MAX_CANDIDATES = 100;

/** What the allocator decided. */
export type Allocation =
  | { kind: "existing"; lease: Lease; stale: Lease[] }
  | { kind: "new"; subnet: IPNet | null; ipv6Subnet: IPNet | null; stale: Lease[] };

/** True when the lease's subnets fit the current config (both families as enabled). */
export function leaseFitsConfig(cfg: NetConfig, l: Lease): boolean {
  if (cfg.enableIPv4 && (!l.subnet || !subnetFitsConfig(cfg, l.subnet))) return false;
  if (cfg.enableIPv6 && (!l.ipv6Subnet || !subnetFitsConfig(cfg, l.ipv6Subnet))) return false;
  return true;
}

function ownedBy(cfg: NetConfig, l: Lease, attrs: LeaseAttrsWire): boolean {
  if (cfg.enableIPv4 && l.attrs.PublicIP !== attrs.PublicIP) return false;
  if (cfg.enableIPv6 && (l.attrs.PublicIPv6 ?? null) !== (attrs.PublicIPv6 ?? null)) return false;
  return true;
}

/**
 * Chooses a lease for a node with `attrs` given the current `leases`. `random(n)` returns an integer in
 * [0, n) (injectable for tests). `stale` lists leases of this node that no longer fit the config (the
 * store deletes them). Throws {@link OutOfSubnetsError} when nothing is free.
 */
export function allocate(
  cfg: NetConfig,
  leases: Lease[],
  attrs: LeaseAttrsWire,
  opts: AcquireOptions = {},
  random: (n: number) => number = (n) => Math.floor(Math.random() * n),
): Allocation {
  const stale: Lease[] = [];
  for (const l of leases) {
    if (!ownedBy(cfg, l, attrs)) continue;
    if (leaseFitsConfig(cfg, l)) return { kind: "existing", lease: l, stale };
    stale.push(l);
  }
  // Taken subnets, as flanneld checks them (allocateSubnet): a candidate is free only when it overlaps no
  // lease or reservation, whatever their size. Leases of the configured length are an exact-match set
  // (fast with thousands of nodes); only other sizes need the overlap test.
  const taken = (fam: 4 | 6, len: number | undefined) => {
    const all = leases.filter((l) => !stale.includes(l)).map((l) => fam === 4 ? l.subnet : l.ipv6Subnet)
      .filter((x): x is IPNet => x !== null);
    const same = new Set(all.filter((x) => x.prefix === len).map((x) => x.ip.value));
    const other = all.filter((x) => x.prefix !== len);
    return (c: IPNet) =>
      c.prefix === len
        ? same.has(c.ip.value) || other.some((o) => o.overlaps(c))
        : all.some((o) => o.overlaps(c));
  };
  const taken4 = taken(4, cfg.subnetMin?.prefix);
  const taken6 = taken(6, cfg.ipv6SubnetMin?.prefix);
  const free = (sn: IPNet | null, sn6: IPNet | null) =>
    (!cfg.enableIPv4 || (sn && !taken4(sn))) &&
    (!cfg.enableIPv6 || (sn6 && !taken6(sn6)));

  const prev = opts.previousSubnet ?? null;
  const prev6 = opts.previousIPv6Subnet ?? null;
  const prevOk = (!cfg.enableIPv4 || (prev && subnetFitsConfig(cfg, prev))) &&
    (!cfg.enableIPv6 || (prev6 && subnetFitsConfig(cfg, prev6)));
  if (prevOk && free(prev, prev6)) {
    return {
      kind: "new",
      subnet: cfg.enableIPv4 ? prev : null,
      ipv6Subnet: cfg.enableIPv6 ? prev6 : null,
      stale,
    };
  }

  const candidates: [IPNet | null, IPNet | null][] = [];
  let sn = cfg.enableIPv4 ? cfg.subnetMin : null;
  let sn6 = cfg.enableIPv6 ? cfg.ipv6SubnetMin : null;
  const inRange = () =>
    (!cfg.enableIPv4 || (sn && sn.ip.value <= cfg.subnetMax!.ip.value)) &&
    (!cfg.enableIPv6 || (sn6 && sn6.ip.value <= cfg.ipv6SubnetMax!.ip.value));
  while (candidates.length < MAX_CANDIDATES && inRange()) {
    if (free(sn, sn6)) candidates.push([sn, sn6]);
    sn = sn ? sn.next() : null;
    sn6 = sn6 ? sn6.next() : null;
  }
  if (candidates.length === 0) {
    const range = [
      cfg.enableIPv4 ? `${cfg.subnetMin}..${cfg.subnetMax}` : "",
      cfg.enableIPv6 ? `${cfg.ipv6SubnetMin}..${cfg.ipv6SubnetMax}` : "",
    ].filter(Boolean).join(" and ");
    throw new OutOfSubnetsError(
      `all ${leases.length} subnets in ${range} are leased (free some with 'flanctl lease revoke' or ` +
        `widen SubnetMin/SubnetMax)`,
    );
  }
  const [a, b] = candidates[random(candidates.length)];
  return { kind: "new", subnet: a, ipv6Subnet: b, stale };
}
