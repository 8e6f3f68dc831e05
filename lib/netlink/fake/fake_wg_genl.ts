/**
 * A fake of the kernel's `wireguard` generic netlink family for unit tests of the kernel WireGuard driver:
 * SET_DEVICE and GET_DEVICE on the links of kind "wireguard" of a {@link FakeNetlink}, applied as the
 * kernel's set_device does (private key, listen port, replace-peers, per peer remove, preshared key — all
 * zero clears it —, endpoint, keepalive, replace-allowed-ips or append). A device that is missing is ENODEV,
 * one of another kind EOPNOTSUPP (as the kernel answers); no family (`present = false`) resolves to null,
 * as genlFamilyId does for ENOENT. Every call is recorded in `calls`.
 *
 * The public half of a private key is the caller's function (the x25519 is not lib/netlink's).
 * @module
 */
import { emptyPeerDump, WgNetlinkError } from "../codec/wgmsg.ts";
import type { WgDeviceConfig, WgDeviceDump, WgPeerDump } from "../codec/wgmsg.ts";
import type { FakeNetlink } from "./fake_netlink.ts";

/** The id the fake family resolves to (the kernel hands out ids from 0x10 up). */
export const FAKE_WG_FAMILY = 0x1c;

interface Dev {
  priv: Uint8Array | null;
  port: number;
  peers: Map<string, WgPeerDump>;
}

const hex = (k: Uint8Array) => Array.from(k, (b) => b.toString(16).padStart(2, "0")).join("");

/** The fake family. */
export class FakeWgGenl {
  /** The kernel has the family (the module is loaded). */
  present = true;
  /** Every call: "familyId", "get DEV", "set DEV key port=N peers=+K,-K" (keys: their first 8 hex digits). */
  readonly calls: string[] = [];
  readonly #nl: FakeNetlink;
  readonly #publicOf: (priv: Uint8Array) => Uint8Array;
  readonly #devs = new Map<string, Dev>();

  constructor(nl: FakeNetlink, publicOf: (priv: Uint8Array) => Uint8Array) {
    this.#nl = nl;
    this.#publicOf = publicOf;
  }

  familyId(): number | null {
    this.calls.push("familyId");
    return this.present ? FAKE_WG_FAMILY : null;
  }

  #dev(family: number, name: string): Dev {
    if (!this.present || family !== FAKE_WG_FAMILY) throw new WgNetlinkError("no such family", 2);
    const l = this.#nl.link(name);
    if (!l) throw new WgNetlinkError("the kernel refused the request: errno 19", 19);
    if (l.kind !== "wireguard") throw new WgNetlinkError("the kernel refused the request: errno 95", 95);
    let d = this.#devs.get(`${l.index}`);
    if (!d) this.#devs.set(`${l.index}`, d = { priv: null, port: 0, peers: new Map() });
    return d;
  }

  set(family: number, c: WgDeviceConfig): void {
    const d = this.#dev(family, c.ifname);
    const said: string[] = [];
    if (c.privateKey) {
      d.priv = Uint8Array.from(c.privateKey);
      said.push("key");
    }
    if (c.listenPort !== undefined) {
      d.port = c.listenPort;
      said.push(`port=${c.listenPort}`);
    }
    if (c.replacePeers) {
      d.peers.clear();
      said.push("replace-peers");
    }
    const ps: string[] = [];
    for (const p of c.peers ?? []) {
      const k = hex(p.publicKey);
      if (p.remove) {
        d.peers.delete(k);
        ps.push(`-${k.slice(0, 8)}`);
        continue;
      }
      ps.push(`+${k.slice(0, 8)}`);
      let have = d.peers.get(k);
      if (!have) {
        d.peers.set(
          k,
          have = emptyPeerDump(Uint8Array.from(p.publicKey)),
        );
      }
      if (p.presharedKey) have.presharedKey = p.presharedKey.some((x) => x !== 0);
      if (p.endpoint !== undefined) have.endpoint = p.endpoint;
      if (p.keepalive !== undefined) have.keepalive = p.keepalive;
      if (p.allowedIPs) have.allowedIPs = [...p.allowedIPs];
    }
    if (ps.length) said.push(`peers=${ps.join(",")}`);
    this.calls.push(`set ${c.ifname}${said.length ? " " + said.join(" ") : ""}`);
  }

  get(family: number, name: string): WgDeviceDump {
    this.calls.push(`get ${name}`);
    const d = this.#dev(family, name);
    return {
      ifindex: this.#nl.link(name)!.index,
      ifname: name,
      privateKey: d.priv !== null,
      publicKey: d.priv ? this.#publicOf(d.priv) : null,
      listenPort: d.port,
      fwmark: 0,
      peers: [...d.peers.values()].map((p) => ({ ...p, allowedIPs: [...p.allowedIPs] })),
    };
  }

  /** A peer's stored state (by its public key's hex), for assertions. */
  peer(keyHex: string): WgPeerDump | undefined {
    for (const d of this.#devs.values()) {
      const p = d.peers.get(keyHex);
      if (p) return p;
    }
    return undefined;
  }
}
