/**
 * TUN devices opened through `/dev/net/tun` with the TUNSETIFF ioctl (IFF_TUN | IFF_NO_PI, optionally
 * IFF_MULTI_QUEUE, or IFF_VNET_HDR with TUNSETOFFLOAD for TCP GSO super-packets), made persistent with
 * TUNSETPERSIST so the device, its address and its routes outlive a daemon restart. The API hands out
 * plain file descriptors (numbers): no pointer leaves lib/sys.
 *
 * Hand-written: a few ioctls on a 40-byte struct ifreq; no npm package does this for Deno.
 * @module
 */
import { cstr, errno, libc } from "./ffi.ts";
import { errnoText, NetlinkError, syscallError } from "./errors.ts";
import { errText } from "../base/errors.ts";
import { netnsIdentity } from "../base/netns_id.ts";
import {
  AF_INET,
  EBUSY,
  IFNAMSIZ,
  O_CLOEXEC,
  O_NONBLOCK,
  O_RDWR,
  SOCK_CLOEXEC,
  SOCK_DGRAM,
} from "./consts.ts";

const IFF_TUN = 0x0001, IFF_NO_PI = 0x1000, IFF_MULTI_QUEUE = 0x0100, IFF_VNET_HDR = 0x4000;
const TUNSETIFF = 0x400454can, TUNSETPERSIST = 0x400454cbn;
const TUNSETOFFLOAD = 0x400454d0n, TUNSETVNETHDRSZ = 0x400454d8n;

/** TUNSETOFFLOAD bits: the reader takes partial checksums, TCP/IPv4 and TCP/IPv6 GSO super-packets. */
const TUN_F_CSUM = 0x01, TUN_F_TSO4 = 0x02, TUN_F_TSO6 = 0x04;
/** The offloads {@link openTunOffloaded} asks for. */
const TUN_OFFLOADS = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
/** Bytes of the virtio_net_hdr before each packet on an IFF_VNET_HDR descriptor. */
export const TUN_VNET_HDR_LEN = 10;

/** The path of the TUN clone device. */
export const TUN_CLONE_DEV = "/dev/net/tun";

/** How to open a TUN device. */
export interface TunOptions {
  /** IFF_MULTI_QUEUE: each open of the same name adds one queue (one fd per queue). */
  multiQueue?: boolean;
  /** IFF_VNET_HDR: every read and write carries a 10-byte virtio_net_hdr before the packet. */
  vnetHdr?: boolean;
}

function fail(op: string, e: number, message?: string): never {
  throw syscallError(op, e, message);
}

/**
 * Opens (creating it when absent) TUN device `name` in the current network namespace and returns the
 * non-blocking file descriptor attached to it. An existing device is attached to when its flags match
 * (a persistent device left by a previous daemon). Throws NetlinkError with errno EBUSY when another
 * process holds the (single-queue) device, EINVAL when `name` exists with other flags or is not a TUN.
 */
export function openTun(name: string, o: TunOptions = {}): number {
  const op = `open TUN ${name}`;
  const nameBytes = new TextEncoder().encode(name);
  if (name === "" || nameBytes.length >= IFNAMSIZ) fail(op, 22, `bad interface name '${name}'`);
  const fd = libc().open(cstr(TUN_CLONE_DEV), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(op, errno(), `cannot open ${TUN_CLONE_DEV}: ${errnoText(errno())}`);
  // struct ifreq: char ifr_name[16]; short ifr_flags at offset 16.
  const ifreq = new Uint8Array(40);
  ifreq.set(nameBytes, 0);
  const flags = IFF_TUN | IFF_NO_PI | (o.multiQueue ? IFF_MULTI_QUEUE : 0) | (o.vnetHdr ? IFF_VNET_HDR : 0);
  new DataView(ifreq.buffer).setUint16(16, flags, true);
  if (libc().ioctl(fd, TUNSETIFF, ifreq) < 0) {
    const e = errno();
    libc().close(fd);
    fail(op, e);
  }
  return fd;
}

/**
 * Sets the offloads the reader of `fd` takes (TUNSETOFFLOAD: {@link TUN_F_CSUM} etc., 0 for none): with
 * TSO the kernel hands over TCP super-packets of up to 64 KiB instead of MTU-sized ones. The setting
 * belongs to the device, not the descriptor (a persistent device keeps it): set it on every open.
 */
export function setTunOffload(fd: number, flags: number): void {
  if (libc().ioctl_int(fd, TUNSETOFFLOAD, BigInt(flags)) < 0) {
    fail(`TUNSETOFFLOAD 0x${flags.toString(16)}`, errno());
  }
}

/** A TUN descriptor from {@link openTunOffloaded}. */
export interface OffloadedTun {
  fd: number;
  /** True: IFF_VNET_HDR with {@link TUN_OFFLOADS}; false: a plain TUN (offloads refused by the kernel). */
  offload: boolean;
  /** Why the offloads are off (the refused ioctl and its errno text), when they are. */
  reason?: string;
}

/**
 * Opens TUN device `name` with IFF_VNET_HDR and TUNSETOFFLOAD {@link TUN_OFFLOADS} (a 10-byte
 * virtio_net_hdr before every packet, TCP GSO super-packets on read); where the kernel refuses either,
 * the descriptor is closed and the device opened plain (offloads cleared), with the reason returned.
 * Errors of the plain open (EBUSY: another process holds the device) are thrown as by {@link openTun}.
 */
export function openTunOffloaded(name: string, o: TunOptions = {}): OffloadedTun {
  let fd = -1;
  try {
    fd = openTun(name, { ...o, vnetHdr: true });
    const sz = new Int32Array([TUN_VNET_HDR_LEN]);
    if (libc().ioctl(fd, TUNSETVNETHDRSZ, new Uint8Array(sz.buffer)) < 0) fail("TUNSETVNETHDRSZ 10", errno());
    setTunOffload(fd, TUN_OFFLOADS);
    return { fd, offload: true };
  } catch (e) {
    if (e instanceof NetlinkError && e.errno === EBUSY) throw e; // held by another process
    closeFdQuiet(fd);
    const plain = openTun(name, o);
    try {
      setTunOffload(plain, 0);
    } catch { /* a kernel without TUNSETOFFLOAD has no offloads to clear */ }
    return { fd: plain, offload: false, reason: errText(e) };
  }
}

/** Sets or clears IFF_PERSIST on the device `fd` is attached to (a persistent device outlives its fds). */
export function setTunPersist(fd: number, on: boolean): void {
  if (libc().ioctl_int(fd, TUNSETPERSIST, on ? 1n : 0n) < 0) fail(`TUNSETPERSIST ${on ? 1 : 0}`, errno());
}

const SIOCSIFTXQLEN = 0x8943n;

/**
 * Sets the transmit queue length of device `name` in the current namespace (`ip link set NAME txqueuelen
 * N`, through the SIOCSIFTXQLEN ioctl on a datagram socket). For a TUN device this is the ring a reader
 * drains: when it is full the kernel drops, so a userspace reader that is not scheduled at once needs more
 * than the default 500.
 */
export function setTxQueueLen(name: string, qlen: number): void {
  const op = `set ${name} txqueuelen ${qlen}`;
  const nameBytes = new TextEncoder().encode(name);
  if (name === "" || nameBytes.length >= IFNAMSIZ) fail(op, 22, `bad interface name '${name}'`);
  const ifreq = new Uint8Array(40);
  ifreq.set(nameBytes, 0);
  new DataView(ifreq.buffer).setInt32(16, qlen, true);
  const fd = libc().socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(op, errno());
  try {
    if (libc().ioctl(fd, SIOCSIFTXQLEN, ifreq) < 0) fail(op, errno());
  } finally {
    libc().close(fd);
  }
}

/** Closes a descriptor returned by {@link openTun} (or any other fd of this layer). */
export function closeFdQuiet(fd: number): void {
  if (fd >= 0) libc().close(fd);
}

/**
 * The pids of processes holding a descriptor attached to TUN device `name` (from /proc/PID/fdinfo, whose
 * `iff:` line names the device of a TUN fd). `netns` (a namespace file, e.g. `/proc/thread-self/ns/net`):
 * only processes in that network namespace ({@link netnsIdentity}: device and inode), since every namespace
 * may have its own `flannel0`; all of them when it is not given or cannot be read. Reading only.
 */
export function tunOwnerPids(name: string, netns?: string): number[] {
  const out: number[] = [];
  const want = netns === undefined ? null : netnsIdentity(netns);
  let procs: Iterable<Deno.DirEntry>;
  try {
    procs = Deno.readDirSync("/proc");
  } catch {
    return out;
  }
  for (const p of procs) {
    if (!/^\d+$/.test(p.name)) continue;
    if (want !== null && netnsIdentity(`/proc/${p.name}/ns/net`) !== want) continue;
    let fds: Iterable<Deno.DirEntry>;
    try {
      fds = Deno.readDirSync(`/proc/${p.name}/fd`);
    } catch {
      continue;
    }
    for (const f of fds) {
      let target: string;
      try {
        target = Deno.readLinkSync(`/proc/${p.name}/fd/${f.name}`);
      } catch {
        continue;
      }
      if (target !== TUN_CLONE_DEV) continue;
      try {
        const info = Deno.readTextFileSync(`/proc/${p.name}/fdinfo/${f.name}`);
        if (new RegExp(`^iff:\\s*${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`, "m").test(info)) {
          out.push(Number(p.name));
          break;
        }
      } catch {
        continue;
      }
    }
  }
  return out;
}
