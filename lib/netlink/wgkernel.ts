/**
 * The kernel WireGuard over generic netlink: resolves the `wireguard` family (CTRL_CMD_GETFAMILY), sends
 * WG_CMD_SET_DEVICE and reads WG_CMD_GET_DEVICE's dump (the bytes: codec/wgmsg.ts). A NETLINK_GENERIC
 * socket of its own through libc, one per call, opened in network namespace `ns` (default: the calling
 * thread's; the thread is switched back at once, the socket stays in `ns`); the reply is
 * bounded ({@link WG_MAX_REPLY}). The private key travels only inside the request bytes, which are zeroed
 * once sent; nothing here logs.
 * @module
 */
import { errno, libc } from "../sys/ffi.ts";
import { inNetns, type NetnsRef } from "../sys/netns.ts";
import { AF_NETLINK, ENOENT, NLMSG_DONE, NLMSG_ERROR, SOCK_CLOEXEC, SOCK_RAW } from "./codec/consts.ts";
import { MsgWriter } from "./codec/msg.ts";
import {
  familyIdOf,
  GENL_ID_CTRL,
  NETLINK_GENERIC,
  parseGetDevice,
  putGetDevice,
  putGetFamily,
  putSetDevice,
  WG_GENL_NAME,
  type WgDeviceConfig,
  type WgDeviceDump,
  WgNetlinkError,
} from "./codec/wgmsg.ts";

/** Largest reply read (a GET_DEVICE dump of 5,000 peers is about 1 MB). */
export const WG_MAX_REPLY = 16 * 1024 * 1024;

function open(ns: NetnsRef | null): number {
  const [fd, e] = inNetns(ns, () => {
    const fd = libc().socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
    return [fd, fd < 0 ? errno() : 0];
  });
  if (fd < 0) throw new WgNetlinkError(`generic netlink socket: errno ${e}`, e);
  return fd;
}

/**
 * Sends `req` and collects the reply's messages: up to NLMSG_DONE (a dump), or up to the ack (an
 * NLMSG_ERROR, which ends the reply whatever its errno: the caller's decoder reads it).
 */
function exchange(fd: number, req: Uint8Array): Uint8Array {
  if (libc().send(fd, req, req.length, 0) < 0) throw new WgNetlinkError(`send: errno ${errno()}`, errno());
  const buf = new Uint8Array(65536);
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const n = libc().recv(fd, buf, buf.length, 0);
    if (n < 0) throw new WgNetlinkError(`recv: errno ${errno()}`, errno());
    if (n === 0) throw new WgNetlinkError("recv: the socket closed before the reply ended");
    total += n;
    if (total > WG_MAX_REPLY) throw new WgNetlinkError(`reply over ${WG_MAX_REPLY} bytes`);
    const v = new DataView(buf.buffer, 0, n);
    let last = -1;
    for (let off = 0; off + 16 <= n;) {
      const len = v.getUint32(off, true);
      if (len < 16 || off + len > n) throw new WgNetlinkError(`reply: a message length ${len} is bad`);
      last = v.getUint16(off + 4, true);
      off += (len + 3) & ~3;
      if (last === NLMSG_DONE || last === NLMSG_ERROR) {
        parts.push(buf.slice(0, Math.min(off, n)));
        return concat(parts);
      }
    }
    parts.push(buf.slice(0, n));
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The id of generic netlink family `name` (default "wireguard"), or null when the kernel has none. */
export function genlFamilyId(name = WG_GENL_NAME, ns: NetnsRef | null = null): number | null {
  const fd = open(ns);
  try {
    const w = new MsgWriter(64);
    putGetFamily(w, 1, name);
    const reply = exchange(fd, w.slice());
    try {
      return familyIdOf(reply);
    } catch (e) {
      if (e instanceof WgNetlinkError && e.errno === ENOENT) return null;
      throw e;
    }
  } finally {
    libc().close(fd);
  }
}

/** The NLMSG_ERROR that ends `reply`, as an error when its errno is not 0. */
function ackOf(reply: Uint8Array): void {
  const v = new DataView(reply.buffer, reply.byteOffset, reply.byteLength);
  for (let off = 0; off + 16 <= reply.length;) {
    const len = v.getUint32(off, true);
    if (v.getUint16(off + 4, true) === NLMSG_ERROR && len >= 20) {
      const e = -v.getInt32(off + 16, true);
      if (e !== 0) throw new WgNetlinkError(`the kernel refused the request: errno ${e}`, e);
      return;
    }
    off += (len + 3) & ~3;
  }
  throw new WgNetlinkError("reply: no acknowledgement");
}

/** Applies `c` to the kernel WireGuard device (family id from {@link genlFamilyId}). */
export function wgSetDevice(family: number, c: WgDeviceConfig, ns: NetnsRef | null = null): void {
  if (family === GENL_ID_CTRL) throw new WgNetlinkError("the wireguard family id is not the controller's");
  const w = new MsgWriter(4096);
  putSetDevice(w, family, 1, c);
  let fd = -1;
  try {
    fd = open(ns);
  } catch (e) {
    w.buf.fill(0);
    throw e;
  }
  try {
    ackOf(exchange(fd, w.slice()));
  } finally {
    w.buf.fill(0);
    libc().close(fd);
  }
}

/** The kernel WireGuard device `name` as its GET_DEVICE dump shows it. */
export function wgGetDevice(family: number, name: string, ns: NetnsRef | null = null): WgDeviceDump {
  const w = new MsgWriter(64);
  putGetDevice(w, family, 1, name);
  const fd = open(ns);
  try {
    return parseGetDevice(exchange(fd, w.slice()), family);
  } finally {
    libc().close(fd);
  }
}
