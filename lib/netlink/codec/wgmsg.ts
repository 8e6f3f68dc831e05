/**
 * The kernel WireGuard's generic netlink messages as bytes (no socket): the family lookup
 * (CTRL_CMD_GETFAMILY "wireguard"), WG_CMD_SET_DEVICE and the WG_CMD_GET_DEVICE dump request, and the
 * decoder of a GET_DEVICE dump reply. Numbers and layouts are the kernel's include/uapi/linux/wireguard.h
 * and linux/genetlink.h: a genlmsghdr (u8 cmd, u8 version, u16 reserved) follows the nlmsghdr; every peer
 * and allowed IP is a nest of type 0 inside WGDEVICE_A_PEERS / WGPEER_A_ALLOWEDIPS; ports, keepalive and
 * the address family are u16 (host order inside the attribute), the CIDR mask u8, flags u32; an endpoint
 * is a struct sockaddr_in (16 bytes) or sockaddr_in6 (28 bytes), port in network order.
 *
 * The decoder reads untrusted bytes: every message and attribute length is checked against its container
 * (a length that runs past it, or bytes left that are no attribute, refuse the whole reply), keys must be
 * 32 bytes, counts are capped. A private key or preshared key in the reply is zeroed where it lies and
 * reported only as "set or not"; nothing here logs.
 * @module
 */
import { FlanctlError } from "../../base/errors.ts";
import { attrStr, AttrWalk } from "./attrs.ts";
import {
  AF_INET,
  AF_INET6,
  NLA_F_NESTED,
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
} from "./consts.ts";
import { formatIP, parsePrefix } from "./format.ts";
import type { MsgWriter } from "./msg.ts";

/** The generic netlink protocol (linux/netlink.h) and its controller (linux/genetlink.h). */
export const NETLINK_GENERIC = 16,
  GENL_ID_CTRL = 0x10,
  CTRL_CMD_GETFAMILY = 3,
  CTRL_ATTR_FAMILY_ID = 1,
  CTRL_ATTR_FAMILY_NAME = 2,
  GENL_HDRLEN = 4;
/** linux/wireguard.h. */
export const WG_GENL_NAME = "wireguard", WG_GENL_VERSION = 1, WG_KEY_LEN = 32;
export const WG_CMD_GET_DEVICE = 0, WG_CMD_SET_DEVICE = 1;
export const WGDEVICE_F_REPLACE_PEERS = 1;
export const WGDEVICE_A_IFINDEX = 1,
  WGDEVICE_A_IFNAME = 2,
  WGDEVICE_A_PRIVATE_KEY = 3,
  WGDEVICE_A_PUBLIC_KEY = 4,
  WGDEVICE_A_FLAGS = 5,
  WGDEVICE_A_LISTEN_PORT = 6,
  WGDEVICE_A_FWMARK = 7,
  WGDEVICE_A_PEERS = 8;
export const WGPEER_F_REMOVE_ME = 1, WGPEER_F_REPLACE_ALLOWEDIPS = 2;
export const WGPEER_A_PUBLIC_KEY = 1,
  WGPEER_A_PRESHARED_KEY = 2,
  WGPEER_A_FLAGS = 3,
  WGPEER_A_ENDPOINT = 4,
  WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL = 5,
  WGPEER_A_LAST_HANDSHAKE_TIME = 6,
  WGPEER_A_RX_BYTES = 7,
  WGPEER_A_TX_BYTES = 8,
  WGPEER_A_ALLOWEDIPS = 9;
export const WGALLOWEDIP_A_FAMILY = 1, WGALLOWEDIP_A_IPADDR = 2, WGALLOWEDIP_A_CIDR_MASK = 3;

/** Most peers and allowed IPs (per peer) a reply may hold before it is refused. */
export const WG_MAX_PEERS = 65_536, WG_MAX_ALLOWED_IPS = 4_096;

/** A request that cannot be encoded, or a reply that is not the protocol (or an error the kernel sent). */
export class WgNetlinkError extends FlanctlError {
  /** The errno of an NLMSG_ERROR reply (positive), else null. */
  readonly errno: number | null;
  constructor(message: string, errno: number | null = null) {
    super(message, 1);
    this.errno = errno;
  }
}

/** One peer of a SET_DEVICE. Keys are raw 32-byte arrays. */
export interface WgPeerConfig {
  publicKey: Uint8Array;
  /** WGPEER_F_REMOVE_ME: nothing else is sent for the peer. */
  remove?: boolean;
  /** 32 bytes; all zero clears it; undefined leaves it. */
  presharedKey?: Uint8Array;
  /** `IP:port` or `[IPv6]:port`. */
  endpoint?: string;
  /** Seconds (u16); 0 turns keepalives off. */
  keepalive?: number;
  /** When given, WGPEER_F_REPLACE_ALLOWEDIPS and these CIDRs. */
  allowedIPs?: string[];
}

/** A SET_DEVICE request. */
export interface WgDeviceConfig {
  ifname: string;
  /** 32 bytes; travels only in the message. */
  privateKey?: Uint8Array;
  listenPort?: number;
  replacePeers?: boolean;
  peers?: WgPeerConfig[];
}

function key(v: Uint8Array | undefined, what: string): Uint8Array {
  if (!(v instanceof Uint8Array) || v.length !== WG_KEY_LEN) {
    throw new WgNetlinkError(`${what}: not ${WG_KEY_LEN} bytes`);
  }
  return v;
}

function u16Val(n: number | undefined, what: string): Uint8Array {
  if (!Number.isInteger(n) || n! < 0 || n! > 0xffff) throw new WgNetlinkError(`${what} ${n}: not 0–65535`);
  return new Uint8Array(new Uint16Array([n!]).buffer);
}

function ifname(s: string): string {
  if (typeof s !== "string" || !/^[^\s/:\0]{1,15}$/.test(s)) {
    throw new WgNetlinkError(`device name ${JSON.stringify(String(s).slice(0, 20))}: not an interface name`);
  }
  return s;
}

/** `IP:port` / `[IPv6]:port` as struct sockaddr_in / sockaddr_in6. */
export function sockaddrOf(endpoint: string): Uint8Array {
  const m = /^(?:(\d{1,3}(?:\.\d{1,3}){3})|\[([0-9a-fA-F:.]+)\]):(\d{1,5})$/.exec(endpoint);
  const port = m ? Number(m[3]) : -1;
  if (!m || port > 65535) throw new WgNetlinkError(`endpoint ${JSON.stringify(endpoint)}: not IP:port`);
  let ip: Uint8Array;
  try {
    ip = parsePrefix(m[1] ?? m[2], "endpoint").bytes;
  } catch {
    throw new WgNetlinkError(`endpoint ${JSON.stringify(endpoint)}: not IP:port`);
  }
  if ((m[1] !== undefined) !== (ip.length === 4)) {
    throw new WgNetlinkError(`endpoint ${JSON.stringify(endpoint)}: not IP:port`);
  }
  const sa = new Uint8Array(ip.length === 4 ? 16 : 28);
  const dv = new DataView(sa.buffer);
  dv.setUint16(0, ip.length === 4 ? AF_INET : AF_INET6, true);
  dv.setUint16(2, port, false);
  sa.set(ip, ip.length === 4 ? 4 : 8);
  return sa;
}

/** CTRL_CMD_GETFAMILY for "wireguard" (its reply carries CTRL_ATTR_FAMILY_ID). */
export function putGetFamily(w: MsgWriter, seq: number, name = WG_GENL_NAME): void {
  const h = w.begin(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_ACK, seq, GENL_HDRLEN);
  w.buf[h] = CTRL_CMD_GETFAMILY;
  w.buf[h + 1] = 1;
  w.str(CTRL_ATTR_FAMILY_NAME, name);
  w.end();
}

/** The family id in a CTRL_CMD_GETFAMILY reply (one message), or null when it holds none. */
export function familyIdOf(b: Uint8Array): number | null {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const end = msgEnd(dv, 0);
  if (dv.getUint16(4, true) === NLMSG_ERROR) throw errorOf(dv, 0, end);
  for (const at = new AttrWalk(dv, 16 + GENL_HDRLEN, end); at.next();) {
    if (at.type === CTRL_ATTR_FAMILY_ID && at.vlen >= 2) return dv.getUint16(at.v, true);
  }
  return null;
}

/** WG_CMD_GET_DEVICE as a dump of device `name` (the kernel answers one or more messages, then DONE). */
export function putGetDevice(w: MsgWriter, family: number, seq: number, name: string): void {
  const n = ifname(name);
  const h = w.begin(family, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq, GENL_HDRLEN);
  w.buf[h] = WG_CMD_GET_DEVICE;
  w.buf[h + 1] = WG_GENL_VERSION;
  w.str(WGDEVICE_A_IFNAME, n);
  w.end();
}

/**
 * WG_CMD_SET_DEVICE of `c` as one message (every value checked before anything is written; a bad one
 * throws and leaves `w` as it was).
 */
export function putSetDevice(w: MsgWriter, family: number, seq: number, c: WgDeviceConfig): void {
  const name = ifname(c.ifname);
  const priv = c.privateKey !== undefined ? key(c.privateKey, "private key") : null;
  const port = c.listenPort !== undefined ? u16Val(c.listenPort, "listen port") : null;
  const peers = (c.peers ?? []).map((p) => ({
    pub: key(p.publicKey, "a peer's public key"),
    remove: !!p.remove,
    psk: p.presharedKey !== undefined ? key(p.presharedKey, "preshared key") : null,
    ep: p.endpoint !== undefined ? sockaddrOf(p.endpoint) : null,
    ka: p.keepalive !== undefined ? u16Val(p.keepalive, "keepalive") : null,
    ips: p.allowedIPs?.map((s) => {
      try {
        return parsePrefix(s, "allowed IP");
      } catch {
        throw new WgNetlinkError(`allowed IP ${JSON.stringify(String(s).slice(0, 60))}: not a CIDR`);
      }
    }) ?? null,
  }));
  const h = w.begin(family, NLM_F_REQUEST | NLM_F_ACK, seq, GENL_HDRLEN);
  w.buf[h] = WG_CMD_SET_DEVICE;
  w.buf[h + 1] = WG_GENL_VERSION;
  w.str(WGDEVICE_A_IFNAME, name);
  if (priv) w.bytes(WGDEVICE_A_PRIVATE_KEY, priv);
  if (port) w.bytes(WGDEVICE_A_LISTEN_PORT, port);
  if (c.replacePeers) w.u32(WGDEVICE_A_FLAGS, WGDEVICE_F_REPLACE_PEERS);
  if (peers.length) {
    const at = w.len;
    w.nest(WGDEVICE_A_PEERS | NLA_F_NESTED);
    for (const p of peers) {
      w.nest(0 | NLA_F_NESTED);
      w.bytes(WGPEER_A_PUBLIC_KEY, p.pub);
      if (p.remove) w.u32(WGPEER_A_FLAGS, WGPEER_F_REMOVE_ME);
      else {
        if (p.ips) w.u32(WGPEER_A_FLAGS, WGPEER_F_REPLACE_ALLOWEDIPS);
        if (p.psk) w.bytes(WGPEER_A_PRESHARED_KEY, p.psk);
        if (p.ep) w.bytes(WGPEER_A_ENDPOINT, p.ep);
        if (p.ka) w.bytes(WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL, p.ka);
        if (p.ips) {
          w.nest(WGPEER_A_ALLOWEDIPS | NLA_F_NESTED);
          for (const ip of p.ips) {
            w.nest(0 | NLA_F_NESTED);
            w.bytes(WGALLOWEDIP_A_FAMILY, u16Val(ip.family === 4 ? AF_INET : AF_INET6, "family"));
            w.bytes(WGALLOWEDIP_A_IPADDR, ip.bytes);
            w.u8(WGALLOWEDIP_A_CIDR_MASK, ip.prefix);
            w.nestEnd();
          }
          w.nestEnd();
        }
      }
      w.nestEnd();
    }
    if (w.len - at > 0xffff) {
      // An attribute's length is 16 bits: the kernel would read a truncated nest (wg(8) splits too).
      const n = w.len - at;
      w.abort();
      throw new WgNetlinkError(
        `the peers take ${n} bytes, over one attribute's 65535: send fewer per request`,
      );
    }
    w.nestEnd();
  }
  w.end();
}

/** A peer as GET_DEVICE shows it (its public key raw; the preshared key only as set or not). */
export interface WgPeerDump {
  publicKey: Uint8Array;
  presharedKey: boolean;
  endpoint: string | null;
  /** Seconds since the epoch of the last handshake; 0 = none. */
  lastHandshake: number;
  rxBytes: number;
  txBytes: number;
  keepalive: number;
  allowedIPs: string[];
}

/** A peer with `publicKey` and nothing else known yet: how a GET_DEVICE dump starts each peer. */
export function emptyPeerDump(publicKey: Uint8Array): WgPeerDump {
  return {
    publicKey,
    presharedKey: false,
    endpoint: null,
    lastHandshake: 0,
    rxBytes: 0,
    txBytes: 0,
    keepalive: 0,
    allowedIPs: [],
  };
}

/** A device as GET_DEVICE shows it; the private key only as set or not (the public key is sent too). */
export interface WgDeviceDump {
  ifindex: number;
  ifname: string;
  privateKey: boolean;
  publicKey: Uint8Array | null;
  listenPort: number;
  fwmark: number;
  peers: WgPeerDump[];
}

function msgEnd(dv: DataView, off: number): number {
  if (off + 16 > dv.byteLength) throw new WgNetlinkError("reply: a message shorter than its header");
  const len = dv.getUint32(off, true);
  if (len < 16 || off + len > dv.byteLength) {
    throw new WgNetlinkError(`reply: a message length ${len} is bad`);
  }
  return off + len;
}

function errorOf(dv: DataView, off: number, end: number): WgNetlinkError {
  if (end - off < 20) return new WgNetlinkError("reply: a short error message");
  const e = -dv.getInt32(off + 16, true);
  return new WgNetlinkError(`the kernel refused the request: errno ${e}`, e);
}

/** Walks every attribute of `[from, to)`; refuses when one overruns or bytes are left that are none. */
function* attrs(dv: DataView, from: number, to: number, what: string): Generator<AttrWalk> {
  const at = new AttrWalk(dv, from, to);
  let p = from;
  while (at.next()) {
    p = at.v + ((at.vlen + 3) & ~3);
    yield at;
  }
  if (p < to) throw new WgNetlinkError(`reply: ${what}: an attribute length runs past its container`);
}

function keyAt(b: Uint8Array, at: AttrWalk, what: string): Uint8Array {
  if (at.vlen !== WG_KEY_LEN) throw new WgNetlinkError(`reply: ${what} is not ${WG_KEY_LEN} bytes`);
  return b.slice(at.v, at.v + WG_KEY_LEN);
}

function need(at: AttrWalk, n: number, what: string): void {
  if (at.vlen < n) throw new WgNetlinkError(`reply: ${what} is shorter than ${n} bytes`);
}

function u64(dv: DataView, v: number): number {
  const n = dv.getBigUint64(v, true);
  return n > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(n);
}

function endpointAt(b: Uint8Array, dv: DataView, at: AttrWalk): string | null {
  need(at, 2, "an endpoint");
  const fam = dv.getUint16(at.v, true);
  if (fam === AF_INET && at.vlen >= 16) {
    return `${formatIP(b.subarray(at.v + 4, at.v + 8))}:${dv.getUint16(at.v + 2, false)}`;
  }
  if (fam === AF_INET6 && at.vlen >= 28) {
    return `[${formatIP(b.subarray(at.v + 8, at.v + 24))}]:${dv.getUint16(at.v + 2, false)}`;
  }
  if (fam === 0) return null;
  throw new WgNetlinkError("reply: an endpoint is not a sockaddr_in/in6");
}

function allowedIP(b: Uint8Array, dv: DataView, from: number, to: number): string {
  let fam = -1, addr: Uint8Array | null = null, mask = -1;
  for (const at of attrs(dv, from, to, "an allowed IP")) {
    if (at.type === WGALLOWEDIP_A_FAMILY) {
      need(at, 2, "an allowed IP's family");
      fam = dv.getUint16(at.v, true);
    } else if (at.type === WGALLOWEDIP_A_IPADDR) addr = b.subarray(at.v, at.v + at.vlen);
    else if (at.type === WGALLOWEDIP_A_CIDR_MASK) {
      need(at, 1, "an allowed IP's mask");
      mask = b[at.v];
    }
  }
  const len = fam === AF_INET ? 4 : fam === AF_INET6 ? 16 : -1;
  if (len < 0 || !addr || addr.length !== len || mask < 0 || mask > len * 8) {
    throw new WgNetlinkError("reply: an allowed IP is not family + address + mask");
  }
  return `${formatIP(addr)}/${mask}`;
}

function peerOf(b: Uint8Array, dv: DataView, from: number, to: number, into: WgDeviceDump): void {
  let p: WgPeerDump | null = null;
  const ips: string[] = [];
  const rest: Partial<WgPeerDump> = {};
  for (const at of attrs(dv, from, to, "a peer")) {
    switch (at.type) {
      case WGPEER_A_PUBLIC_KEY: {
        const k = keyAt(b, at, "a peer's public key");
        const last = into.peers[into.peers.length - 1];
        // A peer whose allowed IPs did not fit one message continues in the next, key first (as wg(8)).
        if (last && last.publicKey.every((x, i) => x === k[i])) p = last;
        else {
          if (into.peers.length >= WG_MAX_PEERS) {
            throw new WgNetlinkError(`reply: over ${WG_MAX_PEERS} peers`);
          }
          p = emptyPeerDump(k);
          into.peers.push(p);
        }
        break;
      }
      case WGPEER_A_PRESHARED_KEY: {
        const k = b.subarray(at.v, at.v + at.vlen);
        if (at.vlen !== WG_KEY_LEN) throw new WgNetlinkError("reply: a preshared key is not 32 bytes");
        rest.presharedKey = k.some((x) => x !== 0);
        k.fill(0);
        break;
      }
      case WGPEER_A_ENDPOINT:
        rest.endpoint = endpointAt(b, dv, at);
        break;
      case WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL:
        need(at, 2, "a keepalive");
        rest.keepalive = dv.getUint16(at.v, true);
        break;
      case WGPEER_A_LAST_HANDSHAKE_TIME:
        need(at, 16, "a handshake time");
        rest.lastHandshake = Math.max(0, Number(dv.getBigInt64(at.v, true)));
        break;
      case WGPEER_A_RX_BYTES:
        need(at, 8, "rx bytes");
        rest.rxBytes = u64(dv, at.v);
        break;
      case WGPEER_A_TX_BYTES:
        need(at, 8, "tx bytes");
        rest.txBytes = u64(dv, at.v);
        break;
      case WGPEER_A_ALLOWEDIPS: {
        const aEnd = at.v + at.vlen;
        for (const ip of attrs(dv, at.v, aEnd, "the allowed IPs")) {
          ips.push(allowedIP(b, dv, ip.v, ip.v + ip.vlen));
        }
        break;
      }
    }
  }
  if (!p) throw new WgNetlinkError("reply: a peer without its public key");
  Object.assign(p, rest);
  if (p.allowedIPs.length + ips.length > WG_MAX_ALLOWED_IPS) {
    throw new WgNetlinkError(`reply: a peer with over ${WG_MAX_ALLOWED_IPS} allowed IPs`);
  }
  p.allowedIPs.push(...ips);
}

/**
 * Decodes a GET_DEVICE dump reply (`b`: every message the kernel sent, up to and with NLMSG_DONE) of
 * family `family`. Throws WgNetlinkError for an NLMSG_ERROR (with its errno) and for anything malformed.
 * Zeroes the private and preshared keys in `b`.
 */
export function parseGetDevice(b: Uint8Array, family: number): WgDeviceDump {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const dev: WgDeviceDump = {
    ifindex: 0,
    ifname: "",
    privateKey: false,
    publicKey: null,
    listenPort: 0,
    fwmark: 0,
    peers: [],
  };
  let off = 0, seen = false;
  while (off < b.length) {
    const end = msgEnd(dv, off);
    const type = dv.getUint16(off + 4, true);
    if (type === NLMSG_ERROR) throw errorOf(dv, off, end);
    if (type === NLMSG_DONE) return doneWith(dev, seen);
    if (type !== family) {
      throw new WgNetlinkError(`reply: a message of type ${type}, not the wireguard family`);
    }
    if (end - off < 16 + GENL_HDRLEN) throw new WgNetlinkError("reply: a message without its genl header");
    seen = true;
    for (const at of attrs(dv, off + 16 + GENL_HDRLEN, end, "the device")) {
      switch (at.type) {
        case WGDEVICE_A_IFINDEX:
          need(at, 4, "the ifindex");
          dev.ifindex = dv.getUint32(at.v, true);
          break;
        case WGDEVICE_A_IFNAME:
          dev.ifname = attrStr(b, at.v, Math.min(at.vlen, 16));
          break;
        case WGDEVICE_A_PRIVATE_KEY:
          if (at.vlen !== WG_KEY_LEN) throw new WgNetlinkError("reply: the private key is not 32 bytes");
          dev.privateKey = b.subarray(at.v, at.v + at.vlen).some((x) => x !== 0);
          b.fill(0, at.v, at.v + at.vlen);
          break;
        case WGDEVICE_A_PUBLIC_KEY: {
          const k = keyAt(b, at, "the public key");
          dev.publicKey = k.some((x) => x !== 0) ? k : null;
          break;
        }
        case WGDEVICE_A_LISTEN_PORT:
          need(at, 2, "the listen port");
          dev.listenPort = dv.getUint16(at.v, true);
          break;
        case WGDEVICE_A_FWMARK:
          need(at, 4, "the fwmark");
          dev.fwmark = dv.getUint32(at.v, true);
          break;
        case WGDEVICE_A_PEERS:
          for (const p of attrs(dv, at.v, at.v + at.vlen, "the peers")) peerOf(b, dv, p.v, p.v + p.vlen, dev);
          break;
      }
    }
    off = (end + 3) & ~3;
  }
  throw new WgNetlinkError("reply: it ends without NLMSG_DONE");
}

function doneWith(dev: WgDeviceDump, seen: boolean): WgDeviceDump {
  if (!seen) throw new WgNetlinkError("reply: NLMSG_DONE before any device message");
  return dev;
}
