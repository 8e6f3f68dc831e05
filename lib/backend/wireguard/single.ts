/**
 * The peers of the one-device modes (`Mode` auto, ipv4, ipv6: flannel-wg carries both families), as flanneld's
 * handleSubnetEvents builds them (pkg/backend/wireguard/wireguard_network.go): one WireGuard peer per node
 * whose AllowedIPs are its IPv4 subnet and its IPv6 subnet, and whose Endpoint is its PublicIP:port (mode
 * ipv4), [PublicIPv6]:port (mode ipv6) or the one {@link selectMode} picks (mode auto). Pure: the backend
 * hands in the peers it accepted, per family.
 * @module
 */
import { tryIp } from "../../base/cidr.ts";
import type { PeerInfo } from "../types.ts";
import type { PeerSet } from "./uapi.ts";
import type { WgMode } from "./options.ts";

/** Whether an IPv4 address is RFC 1918 private (flanneld's ip.IP4.IsPrivate). */
export function privateV4(ip: string): boolean {
  const [a, b] = ip.split(".").map(Number);
  return a === 10 || (a === 172 && (b & 0xf0) === 16) || (a === 192 && b === 168);
}

/** Whether an IPv6 address is in fc00::/7 (flanneld's ip.IP6.IsPrivate). */
export function privateV6(ip: string): boolean {
  const head = ip.toLowerCase().split(":")[0];
  if (head === "") return false; // "::…": its first byte is 0
  return (parseInt(head.padStart(4, "0").slice(0, 2), 16) & 0xfe) === 0xfc;
}

/**
 * flanneld's selectMode (mode auto): the family most likely to connect to a peer whose lease announces
 * `peer4` (PublicIP) and `peer6` (PublicIPv6), from a node whose external addresses are `our4` and `our6`
 * (null: none). No PublicIPv6 → ipv4; a public (not RFC 1918) PublicIP and an IPv4 address of ours → ipv4;
 * a PublicIPv6 outside fc00::/7 and ours outside it too → ipv6; else ipv4. A peer with no IPv4 side (an
 * IPv6-only network) → ipv6.
 */
export function selectMode(
  peer4: string | null,
  peer6: string | null,
  our4: string | null,
  our6: string | null,
): "ipv4" | "ipv6" {
  if (!peer6) return "ipv4";
  if (!peer4) return "ipv6";
  if (!privateV4(peer4) && our4) return "ipv4";
  if (!privateV6(peer6) && our6 && !privateV6(our6)) return "ipv6";
  return "ipv4";
}

/** What the one-device peer set is built from. */
export interface SingleInputs {
  mode: Exclude<WgMode, "separate">;
  /** Our external addresses (flanneld's ExtAddr, ExtV6Addr), null when none. */
  our4: string | null;
  our6: string | null;
  pskHex: string;
  keepalive: number;
}

/** A peer's side in one family: its key, subnet, PublicIP and endpoint (the backend has checked the lease). */
export interface KeyedSide {
  publicKey: string;
  subnet: string;
  publicIP: string;
  endpoint: string;
}

/** The endpoint of a peer: `IP:port`, or `[IPv6]:port`. */
export function endpointOf(ip: string, port: number): string {
  return ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** Turns an accepted peer into its side (`port`: the lease's Port, 0 already replaced by ours). */
export function sideOf(p: PeerInfo, publicKey: string, port: number): KeyedSide {
  const ip = tryIp(p.publicIP)!.toString();
  return {
    publicKey,
    subnet: p.subnet.toString(),
    publicIP: ip,
    endpoint: endpointOf(ip, port),
  };
}

/**
 * The WireGuard peers of the one device: the IPv4 and IPv6 sides of a node joined by public key (flanneld
 * and flanctl write one key in both BackendData and BackendV6Data), AllowedIPs IPv4 first (as flanneld),
 * Endpoint by mode. A side missing (a node leased in one family only) leaves the other's endpoint.
 */
export function singleDevicePeers(
  v4: readonly KeyedSide[],
  v6: readonly KeyedSide[],
  i: SingleInputs,
): PeerSet[] {
  const byKey = new Map<string, { v4?: KeyedSide; v6?: KeyedSide }>();
  for (const s of v4) byKey.set(s.publicKey, { v4: s });
  for (const s of v6) {
    const have = byKey.get(s.publicKey);
    if (have) have.v6 = s;
    else byKey.set(s.publicKey, { v6: s });
  }
  const out: PeerSet[] = [];
  for (const [publicKey, s] of byKey) {
    let family: "ipv4" | "ipv6" = i.mode === "auto"
      ? selectMode(s.v4?.publicIP ?? null, s.v6?.publicIP ?? null, i.our4, i.our6)
      : i.mode;
    if (family === "ipv4" && !s.v4) family = "ipv6";
    if (family === "ipv6" && !s.v6) family = "ipv4";
    out.push({
      publicKey,
      presharedKeyHex: i.pskHex,
      endpoint: (family === "ipv4" ? s.v4 : s.v6)!.endpoint,
      keepalive: i.keepalive,
      allowedIPs: [s.v4?.subnet, s.v6?.subnet].filter((x): x is string => !!x),
    });
  }
  return out;
}
