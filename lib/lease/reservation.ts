/**
 * The key and value of a reservation (a lease without TTL), shared by the etcd and file stores. In a
 * dual-stack network a reservation always names both subnets (`10.5.7.0-24&fc00:0:0:7::-64`): flanneld reads
 * an IPv6-only key `0.0.0.0-0&…` as the IPv4 subnet 0.0.0.0/0, which overlaps every candidate and makes
 * every new flanneld node "out of subnets". The IPv6-only form is for IPv6-only networks.
 * @module
 */
import { ParseError, UsageError } from "../base/errors.ts";
import { IPAddr, type IPNet } from "../base/cidr.ts";
import type { LeaseAttrsWire } from "./types.ts";
import type { NetConfig } from "../config/types.ts";
import { leaseKey } from "./wire.ts";

/** The IPv6 half of a dual-stack reservation. */
export interface ReservationV6 {
  /** The IPv6 subnet reserved with the IPv4 one. */
  subnet: IPNet;
  /** The node's public IPv6. */
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

/** Whether a reservation of `subnet` (and `v6`) lacks the second family a dual-stack network needs. */
function needsBothFamilies(cfg: NetConfig | null, subnet: IPNet, v6?: ReservationV6): boolean {
  return !!cfg && cfg.enableIPv4 && cfg.enableIPv6 && !(v6 && subnet.family === 4);
}

/**
 * Refuses a one-family reservation in a dual-stack network (`cfg`: the stored config, or null when there
 * is none yet): there it must name both subnets, since flanneld reads an IPv6-only key `0.0.0.0-0&…` as
 * the IPv4 subnet 0.0.0.0/0 and its nodes then run out of subnets. Checked by every store's `reserve`.
 */
export function checkReservationFamilies(cfg: NetConfig | null, subnet: IPNet, v6?: ReservationV6): void {
  if (!needsBothFamilies(cfg, subnet, v6)) return;
  throw new ParseError(
    "subnet",
    `${subnet}: a reservation in a dual-stack network needs both families (the IPv4 and the IPv6 subnet in ` +
      "one key); a one-family key such as 0.0.0.0-0&… is read by flanneld as 0.0.0.0/0",
  );
}

/** A reservation as `flanctl lease reserve` asks for it, its arguments checked ({@link reservationRequest}). */
export interface ReservationRequest {
  subnet: IPNet;
  /** The owner's public IP (the family of `subnet`). */
  publicIP: IPAddr;
  /** `--public-ipv6`, when given. */
  publicIPv6: IPAddr | null;
  /** The IPv6 half (SUBNET6 with `--public-ipv6`) of a dual-stack reservation. */
  v6?: ReservationV6;
}

/**
 * Checks the arguments of a reservation before any store is opened: a public IP of the subnet's family,
 * SUBNET6 only as the IPv6 half after an IPv4 SUBNET, and with `--public-ipv6`. Usage errors name the flag.
 */
export function reservationRequest(
  subnet: IPNet,
  subnet6: IPNet | null,
  publicIp: string | undefined,
  publicIpv6: string | undefined,
): ReservationRequest {
  if (!publicIp) throw new UsageError("--public-ip: required (the IP of the node that owns the subnet)");
  const ip = IPAddr.tryParse(publicIp);
  if (!ip) throw new UsageError(`--public-ip: '${publicIp}' is not an IP address`);
  if (ip.family !== subnet.family) {
    throw new UsageError(`--public-ip: ${ip} is IPv${ip.family} but SUBNET ${subnet} is IPv${subnet.family}`);
  }
  if (subnet6 && (subnet.family !== 4 || subnet6.family !== 6)) {
    throw new UsageError(
      `SUBNET6: ${subnet6} must be IPv6 and SUBNET ${subnet} IPv4; give them in that order`,
    );
  }
  const ip6 = publicIpv6 === undefined ? null : IPAddr.tryParse(publicIpv6);
  if (publicIpv6 !== undefined && ip6?.family !== 6) {
    throw new UsageError(`--public-ipv6: '${publicIpv6}' is not an IPv6 address`);
  }
  if (subnet6 && !ip6) throw new UsageError("--public-ipv6: required with SUBNET6 (the node's public IPv6)");
  return {
    subnet,
    publicIP: ip,
    publicIPv6: ip6,
    v6: subnet6 && ip6 ? { subnet: subnet6, publicIP: ip6.toString() } : undefined,
  };
}

/**
 * Checks a reservation against the stored network config: each subnet a /SubnetLen (/IPv6SubnetLen) of
 * its family's network, and, in a dual-stack network, both families (the rule every store's `reserve`
 * enforces too, {@link checkReservationFamilies}). Usage errors name SUBNET or SUBNET6.
 */
export function checkReservationInNetwork(cfg: NetConfig, req: ReservationRequest): void {
  const subnets = req.v6 ? [req.subnet, req.v6.subnet] : [req.subnet];
  for (const sn of subnets) {
    const len = sn.family === 4 ? cfg.subnetLen : cfg.ipv6SubnetLen;
    const net = sn.family === 4 ? cfg.network : cfg.ipv6Network;
    if (!net || !net.contains(sn) || sn.prefix !== len) {
      throw new UsageError(
        `${sn === req.subnet ? "SUBNET" : "SUBNET6"}: ${sn} is not a /${len} subnet of the network ${
          net ?? "(IPv" + sn.family + " disabled)"
        }`,
      );
    }
  }
  if (needsBothFamilies(cfg, req.subnet, req.v6)) {
    throw new UsageError(
      "SUBNET6: required in a dual-stack network (a one-family key such as 0.0.0.0-0&… is read by flanneld " +
        "as 0.0.0.0/0, and its nodes run out of subnets); give the IPv4 subnet, the IPv6 subnet and " +
        "--public-ipv6",
    );
  }
}
