/**
 * Picks and builds the backend named in the network config.
 * @module
 */
import { ConfigError } from "../config/netconf.ts";
import type { NetConfig } from "../config/types.ts";
import type { NetlinkHandle } from "../netlink/types.ts";
import { checkSupported, parseUdpOptions, parseVxlanOptions } from "./config.ts";
import { HostGwBackend } from "./hostgw.ts";
import type { Backend, BackendLog, ExternalIface } from "./types.ts";
import { UdpBackend } from "./udp.ts";
import { VxlanBackend } from "./vxlan.ts";

export type { Backend, ExternalIface, PeerInfo, ReachFn } from "./types.ts";
export { HostGwBackend } from "./hostgw.ts";
export { VxlanBackend } from "./vxlan.ts";
export { UdpBackend } from "./udp.ts";

/**
 * Builds the backend for `cfg` (throws ConfigError for unsupported types or bad options). No kernel changes.
 * `opts.log` receives the udp data path's failures. `opts.vxlanTxChecksumOffload`: true keeps the VXLAN device's TX checksum offload as the kernel sets it,
 * false switches it off, "auto" (the default) decides with {@link keepTxChecksumOffload}.
 */
export function createBackend(
  nl: NetlinkHandle,
  cfg: NetConfig,
  ext: ExternalIface,
  stateDir: string,
  opts: { vxlanTxChecksumOffload?: boolean | "auto"; log?: BackendLog } = {},
): Backend {
  checkSupported(cfg.backend);
  if (cfg.backend.type === "udp") {
    if (!cfg.network) throw new ConfigError("Network", "the udp backend needs an IPv4 Network");
    return new UdpBackend(nl, parseUdpOptions(cfg.backend), ext, cfg.network, opts.log);
  }
  if (cfg.backend.type === "vxlan") {
    return new VxlanBackend(nl, parseVxlanOptions(cfg.backend), ext, stateDir, {
      txChecksumOffload: keepTxChecksumOffload(opts.vxlanTxChecksumOffload ?? "auto", ext),
    });
  }
  return new HostGwBackend(ext);
}

/**
 * Whether to keep TX checksum offload on the VXLAN device. "auto" keeps it (the kernel default, as flanneld:
 * switching it off disables TSO and halves VXLAN throughput) unless the node announces a public IP that is
 * not its interface's address: behind NAT is where encapsulated packets leave with bad checksums
 * (flannel #1279, #2152; flannel's troubleshooting guide).
 */
export function keepTxChecksumOffload(mode: boolean | "auto", ext: ExternalIface): boolean {
  return mode === "auto" ? ext.publicIP === ext.ifaceIP : mode;
}
