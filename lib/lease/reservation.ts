/**
 * The key and value of a reservation (a lease without TTL), shared by the etcd and file stores. In a
 * dual-stack network a reservation always names both subnets (`10.5.7.0-24&fc00:0:0:7::-64`): flanneld reads
 * an IPv6-only key `0.0.0.0-0&…` as the IPv4 subnet 0.0.0.0/0, which overlaps every candidate and makes
 * every new flanneld node "out of subnets". The IPv6-only form is for IPv6-only networks.
 * @module
 */
import { ParseError } from "../base/errors.ts";
import { IPAddr, type IPNet } from "../base/cidr.ts";
import type { LeaseAttrsWire } from "./types.ts";
import type { NetConfig } from "../config/types.ts";
import { leaseKey } from "./wire.ts";

/** The IPv6 half of a dual-stack reservation. */
export interface ReservationV6 {
  subnet: IPNet;
  publicIP: string;
}

/** A reservation as written: key (last path element), attributes, and the subnets it holds. */
export interface ReservationEntry {
  key: string;
  attrs: LeaseAttrsWire;
  /** [subnet, public IP] per family, for the overlap check against existing leases. */
  parts: [IPNet, string][];
}

/** Builds the reservation of `subnet` for `publicIP` (plus the IPv6 half in a dual-stack network). */
export function reservationEntry(subnet: IPNet, publicIP: string, v6?: ReservationV6): ReservationEntry {
  const ip = IPAddr.parse(publicIP, "public-ip").toString();
  if (v6) {
    if (subnet.family !== 4 || v6.subnet.family !== 6) {
      throw new ParseError("subnet", "a dual-stack reservation takes an IPv4 and an IPv6 subnet");
    }
    const ip6 = IPAddr.parse(v6.publicIP, "public-ipv6").toString();
    return {
      key: leaseKey(subnet, v6.subnet),
      attrs: { PublicIP: ip, PublicIPv6: ip6, BackendType: "" },
      parts: [[subnet, ip], [v6.subnet, ip6]],
    };
  }
  return subnet.family === 4
    ? {
      key: leaseKey(subnet),
      attrs: { PublicIP: ip, PublicIPv6: null, BackendType: "" },
      parts: [[subnet, ip]],
    }
    : {
      key: leaseKey(null, subnet),
      attrs: { PublicIP: "0.0.0.0", PublicIPv6: ip, BackendType: "" },
      parts: [[subnet, ip]],
    };
}

/**
 * Refuses a one-family reservation in a dual-stack network (`cfg`: the stored config, or null when there
 * is none yet): there it must name both subnets, since flanneld reads an IPv6-only key `0.0.0.0-0&…` as
 * the IPv4 subnet 0.0.0.0/0 and its nodes then run out of subnets. Checked by every store's `reserve`.
 */
export function checkReservationFamilies(cfg: NetConfig | null, subnet: IPNet, v6?: ReservationV6): void {
  if (!cfg || !cfg.enableIPv4 || !cfg.enableIPv6 || (v6 && subnet.family === 4)) return;
  throw new ParseError(
    "subnet",
    `${subnet}: a reservation in a dual-stack network needs both families (the IPv4 and the IPv6 subnet in ` +
      "one key); a one-family key such as 0.0.0.0-0&… is read by flanneld as 0.0.0.0/0",
  );
}
