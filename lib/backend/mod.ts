/**
 * Picks and builds the backend named in the network config.
 * @module
 */
import type { NetConfig } from "../config/types.ts";
import type { NetlinkHandle } from "../netlink/types.ts";
import { checkSupported, parseVxlanOptions } from "./config.ts";
import { HostGwBackend } from "./hostgw.ts";
import type { Backend, ExternalIface } from "./types.ts";
import { VxlanBackend } from "./vxlan.ts";

export type { Backend, ExternalIface, PeerInfo, ReachFn } from "./types.ts";
export { HostGwBackend } from "./hostgw.ts";
export { VxlanBackend } from "./vxlan.ts";

/**
 * Builds the backend for `cfg` (throws ConfigError for unsupported types or bad options). No kernel changes.
 * `opts.vxlanTxChecksumOffload` true keeps the VXLAN device's TX checksum offload as the kernel sets it.
 */
export function createBackend(
  nl: NetlinkHandle,
  cfg: NetConfig,
  ext: ExternalIface,
  stateDir: string,
  opts: { vxlanTxChecksumOffload?: boolean } = {},
): Backend {
  checkSupported(cfg.backend);
  if (cfg.backend.type === "vxlan") {
    return new VxlanBackend(nl, parseVxlanOptions(cfg.backend), ext, stateDir, {
      txChecksumOffload: opts.vxlanTxChecksumOffload,
    });
  }
  return new HostGwBackend(ext);
}
