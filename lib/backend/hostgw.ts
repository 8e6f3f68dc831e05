/**
 * The host-gw backend: no device; each peer subnet is routed via the peer's public IP, which must be
 * directly reachable (a route without gateway, i.e. the same L2 segment). A peer that is not is refused
 * with a clear reason and skipped.
 * @module
 */
import { ConfigError } from "../config/netconf.ts";
import { type IPNet, tryIp } from "../base/cidr.ts";
import { safeJson } from "../base/capped_read.ts";
import type { DesiredPeer } from "../reconcile/types.ts";
import type { Backend, ExternalIface, PeerInfo, ReachFn } from "./types.ts";

/** The host-gw backend. */
export class HostGwBackend implements Backend {
  readonly type = "host-gw";
  readonly overlayDev = null;
  readonly mtu: number;

  /** 4 routes IPv4 peer subnets via PublicIP; 6 routes IPv6 peer subnets via PublicIPv6. */
  readonly family: 4 | 6;

  constructor(ext: ExternalIface, family: 4 | 6 = 4) {
    this.family = family;
    if (family === 6) {
      // flanneld's host-gw routes IPv6 subnets via the peer's PublicIPv6: it must be the interface's own.
      if (!ext.ifaceIPv6 || ext.publicIPv6 !== ext.ifaceIPv6) {
        throw new ConfigError(
          "Backend.Type",
          `host-gw needs the public IPv6 to be the interface's address: --public-ipv6 ${ext.publicIPv6} differs ` +
            `from ${ext.ifaceIPv6 ?? "(none)"} on ${ext.name} (drop --public-ipv6 or use the vxlan backend)`,
        );
      }
      this.mtu = ext.mtu;
      return;
    }
    if (ext.publicIP !== ext.ifaceIP) {
      throw new ConfigError(
        "Backend.Type",
        `host-gw needs the public IP to be the interface's address: --public-ip ${ext.publicIP} differs from ` +
          `${ext.ifaceIP} on ${ext.name} (drop --public-ip or use the vxlan backend)`,
      );
    }
    this.mtu = ext.mtu;
  }

  prepare(): void {}

  backendData(): null {
    return null;
  }

  ensure(_own: IPNet): string[] {
    return [];
  }

  peer(p: PeerInfo, reach: ReachFn): DesiredPeer | string {
    if (p.backendType !== "host-gw") return `its BackendType is "${p.backendType}", ours is "host-gw"`;
    const pub = tryIp(p.publicIP);
    if (!pub) return `its PublicIP ${safeJson(p.publicIP)} is not an IP address`;
    const r = reach(pub);
    if (!r || r.gateway !== null || !r.devName) {
      const how = !r ? "no route" : `only via gateway ${r.gateway}`;
      return `host-gw cannot reach ${p.publicIP} directly (${how}): the nodes must share one L2 segment ` +
        `(use the vxlan backend, optionally with DirectRouting, across routers)`;
    }
    return {
      route: { dst: p.subnet.toString(), via: pub, dev: r.devName, onlink: false },
      neigh: null,
      fdb: null,
    };
  }
}
