/**
 * The network config (flannel's net-conf.json) after parsing and defaulting. The wire form is the JSON
 * flannel reads (field names matched case-insensitively); `lib/config/netconf.ts` parses it into this.
 * @module
 */
import type { IPNet } from "../base/cidr.ts";

/** Backend section: `Type` plus backend options kept as given (VNI, Port, DirectRouting, …). */
export interface BackendConfig {
  /** "vxlan", "host-gw", "udp", "wireguard", "ipip", "alloc", "extension" (lower case). */
  type: string;
  /** The backend object as given in the JSON (all keys, original spelling). */
  raw: Record<string, unknown>;
}

/** Parsed, defaulted network config. */
export interface NetConfig {
  /** EnableIPv4 (default true). */
  enableIPv4: boolean;
  /** EnableIPv6 (default false). */
  enableIPv6: boolean;
  /** Cluster network (IPv4), when enableIPv4. */
  network: IPNet | null;
  /** SubnetLen: the prefix length of each node's IPv4 subnet. */
  subnetLen: number;
  /** SubnetMin: the first IPv4 subnet handed out, or null for the default. */
  subnetMin: IPNet | null;
  /** SubnetMax: the last IPv4 subnet handed out, or null for the default. */
  subnetMax: IPNet | null;
  /** IPv6Network: the cluster network (IPv6), when enableIPv6. */
  ipv6Network: IPNet | null;
  /** IPv6SubnetLen: the prefix length of each node's IPv6 subnet. */
  ipv6SubnetLen: number;
  /** IPv6SubnetMin, or null for the default. */
  ipv6SubnetMin: IPNet | null;
  /** IPv6SubnetMax, or null for the default. */
  ipv6SubnetMax: IPNet | null;
  /** The Backend object. */
  backend: BackendConfig;
  /** EnableNFTables: flannel's rules in nftables instead of iptables. */
  enableNFTables: boolean;
  /** The JSON text as stored (so it can be written back unchanged). */
  source: string;
}
