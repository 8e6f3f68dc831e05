/**
 * The OS calls the product makes outside netlink, without pointers: network namespaces (switch, list,
 * identify), the FFI libraries a CNI install copies, ethtool's TX checksum switch, unix datagrams
 * (sd_notify), the TUN devices' owners, libnftables, giving memory back (malloc_trim, the binary's pages)
 * and execve. The implementation is lib/sys (libc and libnftables through FFI); kernel objects (links,
 * routes, neighbours, conntrack) are lib/netlink's.
 *
 * A failed call throws {@link NetlinkError} with the errno (the kernel layer's one error class for a
 * refused system call, whichever socket it came from).
 *
 * ```ts
 * const names = listNamedNetns();
 * const lo = inNetns({ name: names[0] }, () => Deno.readTextFileSync("/proc/net/dev"));
 * ```
 * @module
 */
export { NetlinkError } from "../sys/errors.ts";
export {
  closeFd,
  inNetns,
  listNamedNetns,
  netnsIdentity,
  netnsLabel,
  netnsPath,
  openNetnsFd,
} from "../sys/netns.ts";
export type { NetnsRef } from "../sys/netns.ts";
export { CNI_LIBRARIES, LibraryLoadError, RUNTIME_LIB_DIR } from "../sys/ffi.ts";
export { getTxChecksum, setTxChecksum } from "../sys/ethtool.ts";
export { sendUnixDatagram } from "../sys/unix_dgram.ts";
export { tunOwnerPids } from "../sys/tun.ts";
export { nftLibrary, releaseNftLibrary } from "../sys/nftables.ts";
export type { NftLibrary, NftRunOptions, NftRunResult } from "../sys/nftables.ts";
export { releaseFreeMemory, unmapBinaryPages } from "../sys/malloc.ts";
export { execProcess } from "../sys/exec.ts";
