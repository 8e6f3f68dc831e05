/**
 * Picks and builds the backend named in the network config.
 * @module
 */
import { ConfigError } from "../config/netconf.ts";
import type { NetConfig } from "../config/types.ts";
import type { NetlinkHandle } from "../netlink/types.ts";
import { checkSupported, parseUdpOptions, parseVxlanOptions } from "./config.ts";
import { HostGwBackend } from "./hostgw.ts";
import type { Backend, ExternalIface } from "./types.ts";
import { UdpBackend } from "./udp/backend.ts";
import { procSysctl, VxlanBackend } from "./vxlan.ts";
import { AllocBackend } from "./alloc.ts";
import { DEFAULT_COMMAND_TIMEOUT_MS, ExtensionBackend } from "./extension/backend.ts";
import { commandTimeoutMs, parseExtensionOptions, TIMEOUT_ENV } from "./extension/options.ts";
import { quietLog } from "../base/log.ts";
import { WireguardBackend } from "./wireguard/backend.ts";
import { parseWireguardOptions } from "./wireguard/options.ts";
import type { Log } from "../base/log.ts";

export type { Backend, ExternalIface, PeerInfo, ReachFn } from "./types.ts";
export { HostGwBackend } from "./hostgw.ts";
export { VxlanBackend } from "./vxlan.ts";
export { UdpBackend } from "./udp/backend.ts";
export { AllocBackend } from "./alloc.ts";
export { ExtensionBackend } from "./extension/backend.ts";
export { WireguardBackend } from "./wireguard/backend.ts";

/**
 * Builds the backend for `cfg` (throws ConfigError for unsupported types or bad options). No kernel changes.
 * `opts.family` 6 builds the IPv6 half (flannel-v6.<VNI>, or host-gw routes via PublicIPv6).
 * `opts.log` receives the udp data path's failures.
 * `opts.vxlanTxChecksumOffload`: true keeps the VXLAN device's TX checksum offload as the kernel sets it,
 * false switches it off, "auto" (the default) decides with {@link keepTxChecksumOffload}.
 * `opts.storedBackendData`: our lease's BackendData as the store still has it (kube: our node's
 * backend-data annotation); its VtepMAC is kept when the state file is missing.
 */
export function createBackend(
  nl: NetlinkHandle,
  cfg: NetConfig,
  ext: ExternalIface,
  stateDir: string,
  opts: {
    vxlanTxChecksumOffload?: boolean | "auto";
    family?: 4 | 6;
    storedBackendData?: unknown;
    log?: Log;
    /** Dual stack, family 6: the IPv4 backend (wireguard's one-device modes: its device carries IPv6 too). */
    pair?: Backend;
  } = {},
): Backend {
  checkSupported(cfg.backend);
  const family = opts.family ?? 4;
  if (cfg.backend.type === "alloc") return new AllocBackend(ext);
  if (cfg.backend.type === "extension") {
    const commands = parseExtensionOptions(cfg.backend);
    // Dual stack: one extension network for both families (flanneld's); the IPv6 half has no commands.
    if (family === 6 && cfg.enableIPv4) return new AllocBackend(ext, "extension");
    return new ExtensionBackend({
      commands,
      ext,
      network: { v4: cfg.network ?? null, enableIPv4: cfg.enableIPv4, enableIPv6: cfg.enableIPv6 },
      log: opts.log ?? quietLog,
      timeoutMs: commandTimeoutMs(Deno.env.get(TIMEOUT_ENV), DEFAULT_COMMAND_TIMEOUT_MS),
    });
  }
  if (cfg.backend.type === "udp") {
    if (!cfg.network || family !== 4 || cfg.enableIPv6) {
      throw new ConfigError(
        "Backend.Type",
        "the udp backend carries IPv4 only (as flannel's): set EnableIPv6 false",
      );
    }
    return new UdpBackend(nl, parseUdpOptions(cfg.backend), ext, cfg.network, opts.log);
  }
  if (cfg.backend.type === "wireguard") {
    const net = family === 6 ? cfg.ipv6Network : cfg.network;
    if (!net) throw new ConfigError("Network", `the wireguard backend has no IPv${family} Network`);
    const o = parseWireguardOptions(cfg.backend);
    if (o.mode !== "separate" && family === 6 && cfg.enableIPv4) {
      if (!(opts.pair instanceof WireguardBackend)) {
        throw new Error("the wireguard backend's IPv6 side needs its IPv4 backend (one device)");
      }
      return opts.pair.pairV6(net);
    }
    const families = ([4, 6] as const).filter((f) => f === 4 ? cfg.enableIPv4 : cfg.enableIPv6);
    return new WireguardBackend(nl, o, ext, net, family, opts.log, {}, families);
  }
  if (cfg.backend.type === "vxlan") {
    const stored = opts.storedBackendData as { VtepMAC?: unknown } | null | undefined;
    return new VxlanBackend(nl, parseVxlanOptions(cfg.backend), ext, stateDir, {
      storedMac: typeof stored?.VtepMAC === "string" ? stored.VtepMAC : null,
      txChecksumOffload: keepTxChecksumOffload(opts.vxlanTxChecksumOffload ?? "auto", ext, family),
      family,
      sysctl: procSysctl,
    });
  }
  return new HostGwBackend(ext, family);
}

/**
 * Whether to keep TX checksum offload on the VXLAN device. "auto" keeps it (the kernel default, as flanneld:
 * switching it off disables TSO and halves VXLAN throughput) unless the node announces a public IP that is
 * not its interface's address: behind NAT is where encapsulated packets leave with bad checksums
 * (flannel #1279, #2152; flannel's troubleshooting guide).
 */
export function keepTxChecksumOffload(
  mode: boolean | "auto",
  ext: ExternalIface,
  family: 4 | 6 = 4,
): boolean {
  if (mode !== "auto") return mode;
  return family === 6 ? ext.publicIPv6 === ext.ifaceIPv6 : ext.publicIP === ext.ifaceIP;
}
