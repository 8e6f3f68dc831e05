/**
 * The kernel WireGuard over generic netlink: resolves the `wireguard` family (CTRL_CMD_GETFAMILY), sends
 * WG_CMD_SET_DEVICE and reads WG_CMD_GET_DEVICE's dump (the bytes: codec/wgmsg.ts). A NETLINK_GENERIC
 * socket of its own through libc, one per call, opened in network namespace `ns` (default: the calling
 * thread's; the thread is switched back at once, the socket stays in `ns`); the reply is
 * bounded ({@link WG_MAX_REPLY}). A reply is received into one buffer (a buffer outgrown is zeroed at once)
 * and zeroed once parsed or when parsing throws, so the keys a GET_DEVICE dump carries (the private key,
 * the preshared keys) are left in no buffer of this module. The keys a SET_DEVICE sends travel only in the
 * request's writer, which zeroes every buffer it outgrows (codec/msg.ts); its last buffer is zeroed once
 * sent, or when the request is refused before sending. Nothing here logs.
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
 * The two socket calls {@link exchange} makes: each returns the byte count, or minus the errno. On a real
 * socket they are libc's send(2) and recv(2) ({@link socketIo}); a unit test passes its own.
 */
export interface GenlIo {
  send(b: Uint8Array<ArrayBuffer>): number;
  recv(b: Uint8Array<ArrayBuffer>): number;
}

/** {@link GenlIo} on netlink socket `fd`. */
function socketIo(fd: number): GenlIo {
  return {
    send: (b) => {
      const n = libc().send(fd, b, b.length, 0);
      return n < 0 ? -errno() : n;
    },
    recv: (b) => {
      const n = libc().recv(fd, b, b.length, 0);
      return n < 0 ? -errno() : n;
    },
  };
}

/** Room kept free for each recv(2): a netlink datagram never exceeds it, so none is truncated. */
const RECV_ROOM = 65536;

/**
 * Sends `req` and collects the reply's messages: up to NLMSG_DONE (a dump), or up to the ack (an
 * NLMSG_ERROR, which ends the reply whatever its errno: the caller's decoder reads it). Every datagram is
 * received straight into one buffer, which grows by doubling; a buffer left behind by growing is zeroed at
 * once, and so is the buffer itself when this throws. A reply holds keys (GET_DEVICE): the caller zeroes
 * what this returns once read.
 */
function exchange(io: GenlIo, req: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const s = io.send(req);
  if (s < 0) throw new WgNetlinkError(`send: errno ${-s}`, -s);
  let buf = new Uint8Array(RECV_ROOM);
  let total = 0;
  try {
    for (;;) {
      if (buf.length - total < RECV_ROOM) {
        const b = new Uint8Array(buf.length * 2);
        b.set(buf.subarray(0, total));
        buf.fill(0);
        buf = b;
      }
      const n = io.recv(buf.subarray(total));
      if (n < 0) throw new WgNetlinkError(`recv: errno ${-n}`, -n);
      if (n === 0) throw new WgNetlinkError("recv: the socket closed before the reply ended");
      if (total + n > WG_MAX_REPLY) throw new WgNetlinkError(`reply over ${WG_MAX_REPLY} bytes`);
      const v = new DataView(buf.buffer, total, n);
      for (let off = 0; off + 16 <= n;) {
        const len = v.getUint32(off, true);
        if (len < 16 || off + len > n) throw new WgNetlinkError(`reply: a message length ${len} is bad`);
        const type = v.getUint16(off + 4, true);
        off += (len + 3) & ~3;
        if (type === NLMSG_DONE || type === NLMSG_ERROR) return buf.subarray(0, total + Math.min(off, n));
      }
      total += n;
    }
  } catch (e) {
    buf.fill(0);
    throw e;
  }
}

/** The id of generic netlink family `name` (default "wireguard"), or null when the kernel has none. */
export function genlFamilyId(name = WG_GENL_NAME, ns: NetnsRef | null = null): number | null {
  const fd = open(ns);
  try {
    const w = new MsgWriter(64);
    putGetFamily(w, 1, name);
    const reply = exchange(socketIo(fd), w.slice());
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
  const fd = open(ns);
  try {
    wgSetDeviceOver(socketIo(fd), family, c);
  } finally {
    libc().close(fd);
  }
}

/**
 * {@link wgSetDevice} over `io`. The request's bytes (private key, preshared keys) are zeroed before this
 * returns, also when `c` is refused before sending; the writer zeroes every buffer it outgrows.
 */
export function wgSetDeviceOver(io: GenlIo, family: number, c: WgDeviceConfig): void {
  if (family === GENL_ID_CTRL) throw new WgNetlinkError("the wireguard family id is not the controller's");
  const w = new MsgWriter(4096);
  try {
    putSetDevice(w, family, 1, c);
    ackOf(exchange(io, w.slice()));
  } finally {
    w.buf.fill(0);
  }
}

/** The kernel WireGuard device `name` as its GET_DEVICE dump shows it. */
export function wgGetDevice(family: number, name: string, ns: NetnsRef | null = null): WgDeviceDump {
  const fd = open(ns);
  try {
    return wgGetDeviceOver(socketIo(fd), family, name);
  } finally {
    libc().close(fd);
  }
}

/**
 * {@link wgGetDevice} over `io`. The reply's bytes (private key, preshared keys) are zeroed before this
 * returns, also when the reply does not parse.
 */
export function wgGetDeviceOver(io: GenlIo, family: number, name: string): WgDeviceDump {
  const w = new MsgWriter(64);
  putGetDevice(w, family, 1, name);
  const reply = exchange(io, w.slice());
  try {
    return parseGetDevice(reply, family);
  } finally {
    new Uint8Array(reply.buffer).fill(0);
  }
}
