/**
 * A bound, non-blocking IPv4 UDP socket as a plain file descriptor, for the UDP backend's data-path
 * workers (which call recvfrom/sendto on it with blocking FFI calls). Hand-written: socket, setsockopt and
 * bind; Deno.listenDatagram's socket cannot be handed to another thread as an fd.
 * @module
 */
import { errno, libc } from "../../sys/ffi.ts";
import { errnoText, errnoToNle, NetlinkError, syscallError } from "../../sys/errors.ts";
import {
  AF_INET,
  SO_RCVBUFFORCE,
  SO_SNDBUFFORCE,
  SOCK_CLOEXEC,
  SOCK_DGRAM,
  SOCK_NONBLOCK,
  SOL_SOCKET,
  SOL_UDP,
  UDP_GRO,
  UDP_SEGMENT,
} from "../../sys/consts.ts";

/**
 * True when the kernel takes UDP_SEGMENT (UDP GSO, Linux ≥ 4.18) on socket `fd`: one sendmsg of up to
 * 64 KiB with a UDP_SEGMENT control message leaves as datagrams of the given size. Probed by setting the
 * socket's default segment size to 0 (none), which changes nothing.
 */
export function probeUdpSegment(fd: number): boolean {
  const v = new Int32Array([0]);
  return libc().setsockopt(fd, SOL_UDP, UDP_SEGMENT, new Uint8Array(v.buffer), 4) === 0;
}

/**
 * Turns UDP_GRO on (or off) for socket `fd` (Linux ≥ 5.0): datagrams of one flow that arrive as one UDP
 * GSO packet (or that GRO merged) are read in one call, with a UDP_GRO control message giving their size,
 * instead of being cut into one socket buffer each. False when the kernel refuses.
 */
export function setUdpGro(fd: number, on: boolean): boolean {
  const v = new Int32Array([on ? 1 : 0]);
  return libc().setsockopt(fd, SOL_UDP, UDP_GRO, new Uint8Array(v.buffer), 4) === 0;
}

/** errno of "address already in use". */
export { EADDRINUSE } from "../../sys/consts.ts";

/** `struct sockaddr_in` for `ip:port` (16 bytes, network byte order). */
export function sockaddrIn(ip: string, port: number): Uint8Array<ArrayBuffer> {
  const b = new Uint8Array(16);
  const v = new DataView(b.buffer);
  v.setUint16(0, AF_INET, true);
  v.setUint16(2, port, false);
  const parts = ip.split(".").map(Number);
  if (parts.length !== 4 || parts.some((x) => !Number.isInteger(x) || x < 0 || x > 255)) {
    throw new NetlinkError(`sockaddr ${ip}`, errnoToNle(22), errnoText(22), `'${ip}' is not an IPv4 address`);
  }
  b.set(parts, 4);
  return b;
}

/**
 * Creates a UDP socket bound to `ip:port` (ip "0.0.0.0" for any) with `bufBytes` send and receive buffers
 * (forced past net.core.[rw]mem_max: needs CAP_NET_ADMIN; silently left at the default otherwise).
 * Throws NetlinkError carrying the errno (EADDRINUSE when another socket holds the port).
 */
export function bindUdp(ip: string, port: number, bufBytes = 4 << 20): number {
  const op = `bind UDP ${ip}:${port}`;
  const sa = sockaddrIn(ip, port);
  const fd = libc().socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const e = errno();
    throw syscallError(op, e);
  }
  const v = new Int32Array([bufBytes]);
  libc().setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, new Uint8Array(v.buffer), 4);
  libc().setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, new Uint8Array(v.buffer), 4);
  if (libc().bind(fd, sa, 16) < 0) {
    const e = errno();
    libc().close(fd);
    throw syscallError(op, e);
  }
  return fd;
}

/** The port socket `fd` is bound to (getsockname; after a bind to port 0, the one the kernel chose). */
export function boundPort(fd: number): number {
  const sa = new Uint8Array(16);
  const len = new Uint32Array([16]);
  if (libc().getsockname(fd, sa, new Uint8Array(len.buffer)) < 0) {
    const e = errno();
    throw syscallError("getsockname", e);
  }
  return (sa[2] << 8) | sa[3];
}

/** Connects UDP socket `fd` to `ip:port` (its default destination for write, its only source for read). */
export function connectUdp(fd: number, ip: string, port: number): void {
  if (libc().connect(fd, sockaddrIn(ip, port), 16) < 0) {
    const e = errno();
    throw syscallError(`connect UDP ${ip}:${port}`, e);
  }
}

const EFD_NONBLOCK = 0o4000, EFD_CLOEXEC = 0o2000000;

/** A non-blocking eventfd (one worker wakes another's poll by writing 8 bytes to it). */
export function openEventFd(): number {
  const fd = libc().eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    const e = errno();
    throw syscallError("eventfd", e);
  }
  return fd;
}
