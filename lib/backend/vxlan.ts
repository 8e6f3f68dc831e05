/**
 * The VXLAN backend: device `flannel.<VNI>` (learning off, kernel port 8472 unless Port is set), address
 * = our subnet's network address /32, a persisted random VTEP MAC, and per peer a permanent ARP entry, a
 * permanent FDB entry and an onlink route — or, with DirectRouting and a directly reachable peer, a plain
 * route via the peer's public IP.
 * @module
 */
import { ConfigError } from "../config/netconf.ts";
import type { IPNet } from "../ip/cidr.ts";
import type { LinkInfo, NetlinkHandle } from "../netlink/types.ts";
import type { DesiredPeer } from "../reconcile/types.ts";
import type { VxlanOptions } from "./config.ts";
import type { Backend, ExternalIface, PeerInfo, ReachFn } from "./types.ts";
import { isMac, loadMac, randomLocalMac, saveMac } from "./vtep_mac.ts";

/** VXLAN encapsulation overhead (outer IP 20 + UDP 8 + VXLAN 8 + inner Ethernet 14). */
export const VXLAN_OVERHEAD = 50;
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
  readonly #sysctl: ((key: string, value: string) => void) | null;
  /** The MAC the store still publishes for us (kube: our backend-data annotation), if any. */
  readonly #storedMac: string | null;
  /** accept_ra=0 written for the current device. */
  #raOff = false;
  #mac = "";
  #saved = false;

  /**
   * `opts.txChecksumOffload` true leaves TX checksum offload of the device as the kernel sets it; false
   * (the default) switches it off in {@link ensure} (flannel #1279: bad VXLAN checksums on some kernels).
   * `opts.storedMac` is the VTEP MAC the store still publishes for us, used when the state file is missing.
   * `opts.sysctl` writes `/proc/sys/<key>` in the daemon's namespace (for accept_ra=0 on the device, as
   * flanneld); without it no sysctl is written (unit tests).
   */
  constructor(
    nl: NetlinkHandle,
    o: VxlanOptions,
    ext: ExternalIface,
    stateDir: string,
    opts: {
      txChecksumOffload?: boolean;
      sysctl?: (key: string, value: string) => void;
      storedMac?: string | null;
    } = {},
  ) {
    this.#nl = nl;
    this.#storedMac = opts.storedMac && isMac(opts.storedMac) ? opts.storedMac.toLowerCase() : null;
    this.#sysctl = opts.sysctl ?? null;
    this.#txCsumOffload = opts.txChecksumOffload === true;
    this.#o = o;
    this.#ext = ext;
    this.#stateDir = stateDir;
    this.overlayDev = `flannel.${o.vni}`;
    const base = o.mtu || ext.mtu;
    this.mtu = base - VXLAN_OVERHEAD;
    if (this.mtu < 68) {
      throw new ConfigError(
        "Backend.MTU",
        `VXLAN MTU would be ${this.mtu} (${
          o.mtu ? "Backend.MTU" : `MTU of ${ext.name}`
        } ${base} − ${VXLAN_OVERHEAD}); ` +
          `use an underlay MTU of at least ${68 + VXLAN_OVERHEAD}`,
      );
    }
  }

  /** The VTEP MAC in use. */
  get mac(): string {
    return this.#mac;
  }

  /** Why an existing device cannot be reused, or null when it can. */
  incompatibility(l: LinkInfo): string | null {
    if (l.kind !== "vxlan" || !l.vxlan) return `kind is ${l.kind ?? "none"}, not vxlan`;
    const v = l.vxlan;
    const wantPort = this.#o.port || KERNEL_VXLAN_PORT;
    if (v.vni !== this.#o.vni) return `VNI ${v.vni} != ${this.#o.vni}`;
    if ((v.port || KERNEL_VXLAN_PORT) !== wantPort) return `port ${v.port} != ${wantPort}`;
    // As flanneld >= 0.27.4: `local` is the external (public) address, so a device taken over from flanneld
    // behind NAT is reused, not recreated.
    if (v.local !== this.#ext.publicIP) return `local ${v.local} != ${this.#ext.publicIP}`;
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
    this.#mac = l && l.mac && isMac(l.mac) && this.incompatibility(l) === null
      ? l.mac.toLowerCase()
      : randomLocalMac();
  }

  backendData(): VxlanBackendData {
    return { VNI: this.#o.vni, VtepMAC: this.#mac };
  }

  ensure(own: IPNet): string[] {
    const nl = this.#nl;
    const name = this.overlayDev;
    const changes: string[] = [];
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
        local: this.#ext.publicIP,
        dev: this.#ext.index,
        learning: this.#o.learning,
        gbp: this.#o.gbp,
        mtu: this.mtu,
        mac: this.#mac,
      });
      if (!changes.length) changes.push("created");
      this.#raOff = false;
      l = nl.link(name);
      if (!l) throw new Error(`${name} was created but cannot be found`);
    }
    if (l.mtu !== this.mtu) {
      nl.setMtu(name, this.mtu);
      changes.push(`mtu ${l.mtu}->${this.mtu}`);
    }
    if ((l.mac ?? "").toLowerCase() !== this.#mac) {
      nl.setMac(name, this.#mac);
      changes.push(`mac ${l.mac}->${this.#mac}`);
    }
    const want = own.ip.toString();
    let have = false;
    for (const a of nl.addrs(4)) {
      if (a.ifname !== name) continue;
      if (a.local === want && a.prefix === 32) have = true;
      else {
        nl.delAddr(name, `${a.local}/${a.prefix}`);
        changes.push(`removed address ${a.local}/${a.prefix}`);
      }
    }
    if (!have) {
      nl.addAddr(name, `${want}/32`);
      changes.push(`address ${want}/32`);
    }
    if (!l.up) {
      nl.setUp(name, true);
      changes.push("up");
    }
    if (!this.#raOff && this.#sysctl) {
      // As flanneld: no router advertisements on the overlay device (ignored where IPv6 is off).
      try {
        this.#sysctl(`net/ipv6/conf/${name}/accept_ra`, "0");
      } catch { /* IPv6 disabled: nothing to switch off */ }
      this.#raOff = true;
    }
    // flanneld's docs say `ethtool -K flannel.1 tx-checksum-ip-generic off`; a new device has it on, and
    // anyone may switch it on again: checked on every ensure (start and each resync).
    if (!this.#txCsumOffload && nl.txChecksum && nl.setTxChecksum) {
      try {
        if (nl.txChecksum(name)) {
          nl.setTxChecksum(name, false);
          changes.push("tx checksum offload off");
        }
      } catch (e) {
        // Not fatal: the overlay works on most kernels with offload on; say so on every resync.
        changes.push(`tx checksum offload could not be switched off (${e instanceof Error ? e.message : e})`);
      }
    }
    if (!this.#saved) {
      saveMac(this.#stateDir, name, this.#mac);
      this.#saved = true;
    }
    return changes;
  }

  peer(p: PeerInfo, reach: ReachFn): DesiredPeer | string {
    if (p.backendType !== "vxlan") return `its BackendType is "${p.backendType}", ours is "vxlan"`;
    const dst = p.subnet.toString();
    if (this.#o.directRouting) {
      const r = reach(p.publicIP);
      if (r && r.gateway === null && r.devName) {
        return { route: { dst, via: p.publicIP, dev: r.devName, onlink: false }, neigh: null, fdb: null };
      }
    }
    const data = p.backendData as Partial<VxlanBackendData> | null | undefined;
    const mac = data && typeof data === "object" ? data.VtepMAC : undefined;
    if (!isMac(mac)) return `its BackendData has no valid VtepMAC (${JSON.stringify(p.backendData)})`;
    const m = mac.toLowerCase();
    const gw = p.subnet.ip.toString();
    return {
      route: { dst, via: gw, dev: this.overlayDev, onlink: true },
      neigh: { ip: gw, mac: m },
      fdb: { mac: m, dst: p.publicIP },
    };
  }
}
