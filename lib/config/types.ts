/**
 * The network config (flannel's net-conf.json) after parsing and defaulting. The wire form is the JSON
 * flannel reads (field names matched case-insensitively); `lib/config/netconf.ts` parses it into this.
 * @module
 */
import type { IPNet } from "../base/cidr.ts";

/** Backend section: `Type` plus backend options kept as given (VNI, Port, DirectRouting, …). */
export interface BackendConfig {
  /** "vxlan", "host-gw", "udp", "wireguard", "ipip", "alloc" (lower case). */
  type: string;
  /** The backend object as given in the JSON (all keys, original spelling). */
  raw: Record<string, unknown>;
}

/** Parsed, defaulted network config. */
export interface NetConfig {
  enableIPv4: boolean;
  enableIPv6: boolean;
  /** Cluster network (IPv4), when enableIPv4. */
  network: IPNet | null;
  subnetLen: number;
  subnetMin: IPNet | null;
  subnetMax: IPNet | null;
  ipv6Network: IPNet | null;
  ipv6SubnetLen: number;
  ipv6SubnetMin: IPNet | null;
  ipv6SubnetMax: IPNet | null;
  backend: BackendConfig;
  enableNFTables: boolean;
  /** The JSON text as stored (so it can be written back unchanged). */
  source: string;
}
