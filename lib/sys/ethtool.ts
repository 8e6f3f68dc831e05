/**
 * TX checksum offload of a network device, read and switched the way `ethtool -k/-K DEV tx` does: the
 * legacy SIOCETHTOOL ioctl on an AF_INET datagram socket with ETHTOOL_GTXCSUM / ETHTOOL_STXCSUM. The socket
 * is created inside the target namespace (the ioctl acts on the socket's namespace), so this works on any
 * {@link NetnsRef} without the ethtool binary.
 *
 * ETHTOOL_STXCSUM switches the whole checksum feature group (NETIF_F_CSUM_MASK: tx-checksum-ipv4,
 * tx-checksum-ip-generic, tx-checksum-ipv6) the device offers; on a VXLAN device that is
 * tx-checksum-ip-generic, the feature flannel's docs switch off (flannel #1279, kubernetes #88986). The
 * kernel then also drops the features that depend on it (TSO), as `ethtool -K` shows.
 *
 * Hand-written rather than a package: two ioctls with an 8-byte struct; no npm package does this for Deno.
 * @module
 */
import { errno, libc } from "./ffi.ts";
import { errnoText, errnoToNle, NetlinkError, syscallError } from "./errors.ts";
import { closeFd, inNetns } from "./netns.ts";
import type { NetnsRef } from "./netns.ts";
import { AF_INET, IFNAMSIZ, SOCK_CLOEXEC, SOCK_DGRAM } from "./consts.ts";

const SIOCETHTOOL = 0x8946n;
const ETHTOOL_GTXCSUM = 0x16, ETHTOOL_STXCSUM = 0x17;

function fail(op: string, e: number): never {
  throw syscallError(op, e);
}

/**
 * Runs one ethtool command with a `struct ethtool_value { u32 cmd; u32 data; }` on device `ifname` in
 * namespace `ns` (null: the current one) and returns `data` as the kernel left it.
 */
function ethtoolValue(ns: NetnsRef | null, ifname: string, cmd: number, data: number, op: string): number {
  if (typeof ifname !== "string" || ifname === "" || ifname.length >= IFNAMSIZ) {
    throw new NetlinkError(op, errnoToNle(19), errnoText(19), `bad interface name '${ifname}'`);
  }
  const value = new Uint32Array([cmd, data]);
  // struct ifreq (40 bytes): char ifr_name[IFNAMSIZ]; union { ...; void *ifr_data; } at offset 16.
  const ifreq = new Uint8Array(40);
  const name = new TextEncoder().encode(ifname);
  if (name.length >= IFNAMSIZ) fail(op, 22);
  ifreq.set(name, 0);
  const ptr = Deno.UnsafePointer.of(value);
  new DataView(ifreq.buffer).setBigUint64(16, BigInt(Deno.UnsafePointer.value(ptr)), true);
  const fd = inNetns(ns, () => libc().socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd < 0) fail(op, errno());
  try {
    if (libc().ioctl(fd, SIOCETHTOOL, ifreq) < 0) fail(op, errno());
  } finally {
    closeFd(fd);
  }
  return value[1];
}

/** True when TX checksum offload is on for `ifname` (`ethtool -k IFNAME`: tx-checksumming). */
export function getTxChecksum(ns: NetnsRef | null, ifname: string): boolean {
  return ethtoolValue(ns, ifname, ETHTOOL_GTXCSUM, 0, `ethtool -k ${ifname}`) !== 0;
}

/** Switches TX checksum offload of `ifname` on or off (`ethtool -K IFNAME tx on|off`). */
export function setTxChecksum(ns: NetnsRef | null, ifname: string, on: boolean): void {
  ethtoolValue(ns, ifname, ETHTOOL_STXCSUM, on ? 1 : 0, `ethtool -K ${ifname} tx ${on ? "on" : "off"}`);
}
