/**
 * The VXLAN backend: device `flannel.<VNI>` (learning off, kernel port 8472 unless Port is set), address
 * = our subnet's network address /32, a persisted random VTEP MAC, and per peer a permanent ARP entry, a
 * permanent FDB entry and an onlink route — or, with DirectRouting and a directly reachable peer, a plain
 * route via the peer's public IP.
 * @module
 */
import { ConfigError } from "../config/netconf.ts";
import { IPAddr, type IPNet, type Mac, tryIp, tryMac } from "../base/cidr.ts";
import { errText } from "../base/errors.ts";
import { safeJson } from "../base/capped_read.ts";
import type { LinkInfo, NetlinkHandle } from "../netlink/types.ts";
import type { DesiredPeer } from "../reconcile/types.ts";
import type { VxlanOptions } from "./config.ts";
import type { Backend, ExternalIface, PeerInfo, ReachFn } from "./types.ts";
import { loadMac, randomLocalMac, saveMac } from "./vtep_mac.ts";
import { vtepMacOf } from "../lease/backend_data.ts";

/** VXLAN encapsulation overhead (outer IP 20 + UDP 8 + VXLAN 8 + inner Ethernet 14). */
export const VXLAN_OVERHEAD = 50;
/**
 * VXLAN over an IPv6 underlay: the outer header is 40 bytes, not 20. flanneld subtracts 50 for its
 * flannel-v6 device too, so full-size pod packets over it exceed the underlay MTU; flanctl uses 70.
 */
export const VXLAN6_OVERHEAD = 70;
/** The kernel's VXLAN port when none is given (Linux's historical default, flannel's too). */
export const KERNEL_VXLAN_PORT = 8472;

/** The lease BackendData of a VXLAN node. */
export interface VxlanBackendData {
  VNI: number;
  VtepMAC: string;
}

/** The VXLAN backend. */
export class VxlanBackend implements Backend {
  readonly type = "vxlan";
  readonly overlayDev: string;
  readonly mtu: number;
  readonly #nl: NetlinkHandle;
  readonly #o: VxlanOptions;
  readonly #ext: ExternalIface;
  readonly #stateDir: string;
  readonly #txCsumOffload: boolean;
  /** 4: flannel.<VNI> over the IPv4 underlay; 6: flannel-v6.<VNI> over the IPv6 underlay. */
  readonly family: 4 | 6;
  /** The underlay address used as the device's `local` (the external IPv4 or IPv6 address). */
  readonly #local: string;
  /** /proc/sys of the daemon's namespace (accept_ra=0 on the device); null: none written (unit tests). */
  readonly #sysctl: SysctlIO | null;
  /** The MAC the store still publishes for us (kube: our backend-data annotation), if any. */
  readonly #storedMac: Mac | null;
  #mac: Mac | null = null;
  #saved = false;

  /**
   * `opts.txChecksumOffload` true leaves TX checksum offload of the device as the kernel sets it; false
   * (the default) switches it off in {@link ensure} (flannel #1279: bad VXLAN checksums on some kernels).
   * `opts.family` 6 builds the IPv6 device `flannel-v6.<VNI>` (local = the external IPv6 address, MTU =
   * underlay − 70, address = our IPv6 subnet's network address /128, its own persisted VTEP MAC).
   * `opts.storedMac` is the VTEP MAC the store still publishes for us, used when the state file is missing.
   * `opts.sysctl` reads and writes `/proc/sys/<key>` in the daemon's namespace (for accept_ra=0 on the
   * device, as flanneld); without it no sysctl is written (unit tests).
   */
  constructor(
    nl: NetlinkHandle,
    o: VxlanOptions,
    ext: ExternalIface,
    stateDir: string,
    opts: { txChecksumOffload?: boolean; family?: 4 | 6; sysctl?: SysctlIO; storedMac?: string | null } = {},
  ) {
    this.#nl = nl;
    this.#storedMac = tryMac(opts.storedMac);
    this.#sysctl = opts.sysctl ?? null;
    this.family = opts.family ?? 4;
    const v6 = this.family === 6;
    // As flanneld >= 0.27.4: `local` is the external (public) address, so a device taken over from flanneld
    // behind NAT is reused, not recreated.
    this.#local = v6 ? ext.publicIPv6 ?? ext.ifaceIPv6 ?? "" : ext.publicIP;
    this.#txCsumOffload = opts.txChecksumOffload === true;
    this.#o = o;
    this.#ext = ext;
    this.#stateDir = stateDir;
    this.overlayDev = v6 ? `flannel-v6.${o.vni}` : `flannel.${o.vni}`;
    const base = o.mtu || ext.mtu;
    const overhead = v6 ? VXLAN6_OVERHEAD : VXLAN_OVERHEAD;
    this.mtu = base - overhead;
    // IPv6 needs 1280 on every link; IPv4 68.
    const min = v6 ? 1280 : 68;
    if (this.mtu < min) {
      throw new ConfigError(
        "Backend.MTU",
        `VXLAN MTU would be ${this.mtu} (${
          o.mtu ? "Backend.MTU" : `MTU of ${ext.name}`
        } ${base} − ${overhead}); ` +
          `use an underlay MTU of at least ${min + overhead}`,
      );
    }
  }

  /** The VTEP MAC in use ("" before {@link prepare}). */
  get mac(): string {
    return this.#mac ?? "";
  }

  /** The VTEP MAC, choosing it first when {@link prepare} has not run. */
  #vtep(): Mac {
    if (this.#mac === null) this.prepare();
    return this.#mac!;
  }

  /** Why an existing device cannot be reused, or null when it can. */
  incompatibility(l: LinkInfo): string | null {
    if (l.kind !== "vxlan" || !l.vxlan) return `kind is ${l.kind ?? "none"}, not vxlan`;
    const v = l.vxlan;
    const wantPort = this.#o.port || KERNEL_VXLAN_PORT;
    if (v.vni !== this.#o.vni) return `VNI ${v.vni} != ${this.#o.vni}`;
    if ((v.port || KERNEL_VXLAN_PORT) !== wantPort) return `port ${v.port} != ${wantPort}`;
    if (v.local !== this.#local) return `local ${v.local} != ${this.#local}`;
    if (v.dev !== this.#ext.index) {
      return `underlay ifindex ${v.dev} != ${this.#ext.index} (${this.#ext.name})`;
    }
    if (v.learning !== this.#o.learning) return `learning ${v.learning} != ${this.#o.learning}`;
    if (v.gbp !== this.#o.gbp) return `gbp ${v.gbp} != ${this.#o.gbp}`;
    return null;
  }

  prepare(): void {
    const persisted = loadMac(this.#stateDir, this.overlayDev);
    if (persisted) {
      this.#mac = persisted;
      this.#saved = true;
      return;
    }
    // State file gone (a wiped disk): the MAC our peers know from the store, then a compatible device's,
    // then a new one.
    if (this.#storedMac) {
      this.#mac = this.#storedMac;
      return;
    }
    const l = this.#nl.link(this.overlayDev);
    const kept = l && this.incompatibility(l) === null ? tryMac(l.mac) : null;
    this.#mac = kept ?? randomLocalMac();
  }

  backendData(): VxlanBackendData {
    return { VNI: this.#o.vni, VtepMAC: this.#vtep() };
  }

  ensure(own: IPNet): string[] {
    const nl = this.#nl;
    const name = this.overlayDev;
    const changes: string[] = [];
    const mac = this.#vtep();
    let l = nl.link(name);
    if (l) {
      const why = this.incompatibility(l);
      if (why) {
        nl.deleteLink(name);
        changes.push(`recreated (${why})`);
        l = null;
      }
    }
    if (!l) {
      nl.createVxlan(name, {
        vni: this.#o.vni,
        port: this.#o.port || undefined,
        local: this.#local,
        dev: this.#ext.index,
        learning: this.#o.learning,
        gbp: this.#o.gbp,
        mtu: this.mtu,
        mac,
      });
      if (!changes.length) changes.push("created");
      l = nl.link(name);
      if (!l) throw new Error(`${name} was created but cannot be found`);
    }
    if (l.mtu !== this.mtu) {
      nl.setMtu(name, this.mtu);
      changes.push(`mtu ${l.mtu}->${this.mtu}`);
    }
    if ((l.mac ?? "").toLowerCase() !== mac) {
      nl.setMac(name, mac);
      changes.push(`mac ${l.mac}->${mac}`);
    }
    const want = own.ip.toString();
    const hostLen = this.family === 6 ? 128 : 32;
    let have = false;
    for (const a of nl.addrs(this.family)) {
      if (a.ifname !== name) continue;
      // The kernel's own IPv6 link-local address stays (it is not ours to remove).
      if (a.family === 6 && a.scope === "link") continue;
      if (a.local === want && a.prefix === hostLen) have = true;
      else {
        nl.delAddr(name, `${a.local}/${a.prefix}`);
        changes.push(`removed address ${a.local}/${a.prefix}`);
      }
    }
    if (!have) {
      nl.addAddr(name, `${want}/${hostLen}`);
      changes.push(`address ${want}/${hostLen}`);
    }
    if (this.#sysctl) {
      // As flanneld: no router advertisements on the overlay device. On the IPv4 device a failure means
      // IPv6 is off in this namespace: nothing to switch off.
      const ra = noRouterAdvertisements(this.#sysctl, name);
      if (this.family === 6 || !ra[0]?.startsWith("accept_ra could not")) changes.push(...ra);
    }
    if (!l.up) {
      nl.setUp(name, true);
      changes.push("up");
    }
    // flanneld's docs say `ethtool -K flannel.1 tx-checksum-ip-generic off`; a new device has it on, and
    // anyone may switch it on again: checked on every ensure (start and each resync).
    if (!this.#txCsumOffload) {
      try {
        if (nl.txChecksum(name)) {
          nl.setTxChecksum(name, false);
          changes.push("tx checksum offload off");
        }
      } catch (e) {
        // Not fatal: the overlay works on most kernels with offload on; say so on every resync.
        changes.push(`tx checksum offload could not be switched off (${errText(e)})`);
      }
    }
    if (!this.#saved) {
      saveMac(this.#stateDir, name, mac);
      this.#saved = true;
    }
    return changes;
  }

  peer(p: PeerInfo, reach: ReachFn): DesiredPeer | string {
    if (p.backendType !== "vxlan") return `its BackendType is "${p.backendType}", ours is "vxlan"`;
    if (this.family === 6 && IPAddr.tryParse(p.publicIP)?.family !== 6) {
      return `its lease has no PublicIPv6 (${safeJson(p.publicIP)}): the node does not run IPv6`;
    }
    const pub = tryIp(p.publicIP);
    if (!pub) return `its PublicIP ${safeJson(p.publicIP)} is not an IP address`;
    const dst = p.subnet.toString();
    if (this.#o.directRouting) {
      const r = reach(pub);
      if (r && r.gateway === null && r.devName) {
        return { route: { dst, via: pub, dev: r.devName, onlink: false }, neigh: null, fdb: null };
      }
    }
    const m = vtepMacOf(p.backendData);
    if (!m) return `its BackendData has no valid VtepMAC (${safeJson(p.backendData)})`;
    const gw = p.subnet.ip.toString();
    return {
      route: { dst, via: gw, dev: this.overlayDev, onlink: true },
      neigh: { ip: gw, mac: m },
      fdb: { mac: m, dst: pub },
    };
  }
}

/**
 * Sets `net.ipv6.conf.<dev>.accept_ra` to 0 (as flanneld does for its VXLAN devices): router advertisements
 * on the overlay must never add addresses or routes. Returns what changed. Reads first (a no-op when
 * already 0); the daemon runs in the node's namespace, whose /proc/sys/net this is.
 */
export function noRouterAdvertisements(io: SysctlIO, dev: string): string[] {
  const key = `net/ipv6/conf/${dev}/accept_ra`;
  try {
    if (io.read(key) === "0") return [];
    io.write(key, "0");
    return ["accept_ra 0"];
  } catch (e) {
    return [`accept_ra could not be set to 0 (${errText(e)})`];
  }
}

/** Reads and writes sysctls (`net/ipv6/conf/DEV/accept_ra`) of the namespace the daemon runs in. */
export interface SysctlIO {
  read(key: string): string;
  write(key: string, value: string): void;
}

/** The real /proc/sys of the calling process's network namespace. */
export const procSysctl: SysctlIO = {
  read: (key) => Deno.readTextFileSync(`/proc/sys/${key}`).trim(),
  write: (key, value) => Deno.writeTextFileSync(`/proc/sys/${key}`, value),
};
