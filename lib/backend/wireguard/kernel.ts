/**
 * The kernel's way to a WireGuard device: a link of kind `wireguard` made over rtnetlink (the
 * NetlinkHandle), its key, port and peers written with WG_CMD_SET_DEVICE and read with WG_CMD_GET_DEVICE
 * over the `wireguard` generic netlink family (lib/netlink/wgkernel.ts), in the handle's namespace. The
 * requests are the UAPI driver's (uapi.ts DeviceSet/DeviceState), turned into the family's: keys from
 * base64/hex into raw bytes, a preshared key "" into 32 zero bytes (cleared). The raw private and preshared
 * keys are zeroed once the requests are sent (or refused), and lib/netlink zeroes every buffer the request
 * bytes were written into; the hex strings they came from are JavaScript strings, which cannot be zeroed. A
 * GET reply's private key is only "set or not" (the kernel sends its public half), its preshared keys only
 * "set or not", and lib/netlink zeroes the reply once parsed. Peers over {@link WG_SET_PEER_BYTES} are split
 * into several SET_DEVICE requests ({@link setRequests}).
 *
 * Where this kernel has no WireGuard (this machine's), the link kind is refused (EOPNOTSUPP) or the family
 * is missing: {@link WgKernelMissing}, which the choice (choose.ts) turns into the userspace way.
 * @module
 */
import { FlanctlError } from "../../base/errors.ts";
import {
  EOPNOTSUPP,
  genlFamilyId,
  NetlinkError,
  type NetlinkHandle,
  type NetnsRef,
  type WgDeviceConfig,
  type WgDeviceDump,
  wgGetDevice,
  type WgPeerConfig,
  wgSetDevice,
} from "../../netlink/mod.ts";
import { keyBase64, keyFromHex, parseKey } from "./keys.ts";
import type { DeviceSet, DeviceState } from "./uapi.ts";
import type { WgDriver } from "./driver.ts";

/** The kernel has no WireGuard: the link kind refused, or no `wireguard` generic netlink family. */
export class WgKernelMissing extends FlanctlError {}

/** The generic netlink calls the kernel driver makes (tests pass a fake). */
export interface WgGenl {
  /** The `wireguard` family's id, or null when the kernel has none. */
  familyId(): number | null;
  set(family: number, c: WgDeviceConfig): void;
  get(family: number, dev: string): WgDeviceDump;
}

/** The kernel's generic netlink, in namespace `ns` (the handle's). */
export function kernelGenl(ns: NetnsRef | null): WgGenl {
  return {
    familyId: () => genlFamilyId(undefined, ns),
    set: (family, c) => wgSetDevice(family, c, ns),
    get: (family, dev) => wgGetDevice(family, dev, ns),
  };
}

function rawKey(s: string, what: string, hex: boolean): Uint8Array {
  const k = hex ? keyFromHex(s) : parseKey(s);
  if (!k) throw new FlanctlError(`${what}: not a WireGuard key`);
  return k;
}

/**
 * A UAPI-shaped set request as the family's SET_DEVICE of device `dev`. When a key does not parse, the raw
 * keys made before it are zeroed before the error is thrown.
 */
export function configOf(dev: string, s: DeviceSet): WgDeviceConfig {
  const c: WgDeviceConfig = { ifname: dev };
  const secrets: Uint8Array[] = [];
  const secret = (k: Uint8Array) => (secrets.push(k), k);
  try {
    if (s.privateKeyHex !== undefined) c.privateKey = secret(rawKey(s.privateKeyHex, "private key", true));
    if (s.listenPort !== undefined) c.listenPort = s.listenPort;
    if (s.replacePeers) c.replacePeers = true;
    if (s.peers?.length) {
      c.peers = s.peers.map((p) => {
        const publicKey = rawKey(p.publicKey, "a peer's public key", false);
        if (p.remove) return { publicKey, remove: true };
        return {
          publicKey,
          ...(p.presharedKeyHex !== undefined
            ? {
              presharedKey: p.presharedKeyHex === ""
                ? new Uint8Array(32)
                : secret(rawKey(p.presharedKeyHex, "preshared key", true)),
            }
            : {}),
          ...(p.endpoint !== undefined ? { endpoint: p.endpoint } : {}),
          ...(p.keepalive !== undefined ? { keepalive: p.keepalive } : {}),
          ...(p.allowedIPs ? { allowedIPs: p.allowedIPs } : {}),
        };
      });
    }
  } catch (e) {
    for (const k of secrets) k.fill(0);
    throw e;
  }
  return c;
}

/** Most bytes of peers in one SET_DEVICE (their nest's length is 16 bits; wg(8) splits alike). */
export const WG_SET_PEER_BYTES = 32_768;

/** A peer's bytes in a SET_DEVICE at most: keys, flags, an IPv6 endpoint, keepalive, 40 per allowed IP. */
function peerBytes(p: WgPeerConfig): number {
  return 128 + 40 * (p.allowedIPs?.length ?? 0);
}

/**
 * `c` as SET_DEVICE requests whose peers fit {@link WG_SET_PEER_BYTES}: the first carries the key, port and
 * replace-peers flag; each peer goes whole into one request, in order.
 */
export function setRequests(c: WgDeviceConfig): WgDeviceConfig[] {
  const { peers = [], ...device } = c;
  const out: WgDeviceConfig[] = [];
  let cur: WgPeerConfig[] = [], size = 0;
  const flush = () => {
    out.push(
      out.length ? { ifname: c.ifname, peers: cur } : { ...device, ...(cur.length ? { peers: cur } : {}) },
    );
    cur = [];
    size = 0;
  };
  for (const p of peers) {
    const n = peerBytes(p);
    if (cur.length && size + n > WG_SET_PEER_BYTES) flush();
    cur.push(p);
    size += n;
  }
  flush();
  return out;
}

/** The family's GET_DEVICE dump in the UAPI's shape. */
export function stateOf(d: WgDeviceDump): DeviceState {
  return {
    publicKey: d.privateKey && d.publicKey ? keyBase64(d.publicKey) : null,
    listenPort: d.listenPort,
    fwmark: d.fwmark,
    peers: d.peers.map((p) => ({
      publicKey: keyBase64(p.publicKey),
      presharedKey: p.presharedKey,
      endpoint: p.endpoint,
      lastHandshake: p.lastHandshake,
      txBytes: p.txBytes,
      rxBytes: p.rxBytes,
      keepalive: p.keepalive,
      allowedIPs: p.allowedIPs,
    })),
  };
}

/**
 * The kernel device `dev` as GET_DEVICE shows it, in the UAPI's shape (for doctor, trace and inspect, which
 * read without a driver). WgKernelMissing when the kernel has no `wireguard` family.
 */
export function kernelDeviceState(genl: WgGenl, dev: string, family = genl.familyId()): DeviceState {
  if (family === null) {
    throw new WgKernelMissing("the kernel has no wireguard generic netlink family (ENOENT)");
  }
  return stateOf(genl.get(family, dev));
}

/** The kernel module's device. */
export class KernelDriver implements WgDriver {
  readonly way = "kernel" as const;
  readonly dev: string;
  readonly #nl: NetlinkHandle;
  readonly #mtu: number;
  readonly #genl: WgGenl;
  #family: number | null = null;

  constructor(nl: NetlinkHandle, dev: string, mtu: number, genl: WgGenl) {
    this.#nl = nl;
    this.dev = dev;
    this.#mtu = mtu;
    this.#genl = genl;
  }

  /** The family id (looked up once); WgKernelMissing when there is none. */
  #familyId(): number {
    if (this.#family !== null) return this.#family;
    const id = this.#genl.familyId();
    if (id === null) throw new WgKernelMissing("the kernel has no wireguard generic netlink family (ENOENT)");
    return this.#family = id;
  }

  /**
   * Makes the link when missing (a link of another kind under the name is deleted first) and resolves the
   * family. A link made here is deleted again when the family cannot be resolved: nothing is left behind.
   */
  ensureDevice(): string[] {
    const nl = this.#nl, dev = this.dev, changes: string[] = [];
    const l = nl.link(dev);
    if (l?.kind === "wireguard") {
      this.#familyId();
      return changes;
    }
    if (l) {
      nl.deleteLink(dev);
      changes.push(`recreated (kind is ${l.kind ?? "none"}, not the kernel's wireguard)`);
    }
    try {
      nl.createWireguard(dev, { mtu: this.#mtu });
    } catch (e) {
      if (e instanceof NetlinkError && e.errno === EOPNOTSUPP) {
        throw new WgKernelMissing(
          `the kernel refused the link kind wireguard (EOPNOTSUPP: ${
            e.kernelMessage ?? "Operation not supported"
          }; no wireguard module)`,
        );
      }
      throw e;
    }
    try {
      this.#familyId();
    } catch (e) {
      try {
        nl.deleteLink(dev);
      } catch { /* gone already */ }
      throw e;
    }
    if (!changes.length) changes.push("created");
    return changes;
  }

  get(): Promise<DeviceState> {
    try {
      return Promise.resolve(kernelDeviceState(this.#genl, this.dev, this.#familyId()));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Applies `s` in as many SET_DEVICE requests as its peers need ({@link setRequests}). */
  configure(s: DeviceSet): Promise<void> {
    let c: WgDeviceConfig | null = null;
    try {
      c = configOf(this.dev, s);
      const family = this.#familyId();
      for (const part of setRequests(c)) this.#genl.set(family, part);
      return Promise.resolve();
    } catch (e) {
      return Promise.reject(e);
    } finally {
      c?.privateKey?.fill(0);
      for (const p of c?.peers ?? []) p.presharedKey?.fill(0);
    }
  }

  close(): void {}
}
