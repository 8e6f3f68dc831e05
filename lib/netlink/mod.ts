/**
 * The kernel layer's public face: open a {@link NetlinkHandle} on any network namespace (links, addresses,
 * routes, neighbours, FDB, pipelined writes), route lookups, neighbour tables, nsids, conntrack deletion, the
 * kernel WireGuard over generic netlink (`wgkernel.ts`).
 * The implementation speaks netlink through libnl and libc over FFI (`handle.ts`), loaded on first use.
 * Other OS calls (namespaces, ethtool, TUN, nftables, memory, exec) are lib/os's.
 *
 * ```ts
 * const h = openNetlink({ name: "blue" });
 * try {
 *   h.replaceRoute({ dst: "10.244.2.0/24", via: "10.244.2.0", dev: "flannel.1", onlink: true });
 * } finally {
 *   h.close();
 * }
 * ```
 * @module
 */
import { openLibnl } from "./handle.ts";
export { nsidOf, readNeighTables, routeGet } from "./handle.ts";
/**
 * The kernel numbers callers compare route and neighbour entries with (tables, route type and protocol, NUD)
 * and the errno values a route lookup answers with ({@link RouteLookup}'s `errno`: rp_filter's EXDEV, a
 * martian source's EINVAL, EHOSTUNREACH for an unreachable route); EOPNOTSUPP: a link kind the kernel lacks.
 */
export {
  EHOSTUNREACH,
  EINVAL,
  EOPNOTSUPP,
  EXDEV,
  NUD_PERMANENT,
  RT_TABLE_DEFAULT,
  RT_TABLE_LOCAL,
  RT_TABLE_MAIN,
  RTN_UNICAST,
  RTPROT_KERNEL,
} from "./codec/consts.ts";
export type { RouteLookup, RouteQuery } from "./routeget.ts";
import type { NetlinkHandle, NetnsRef } from "./types.ts";

export type * from "./types.ts";
export { NetlinkError } from "../sys/errors.ts";
export { ConntrackError, deleteConntrack } from "./conntrack.ts";
export type { ConntrackFilter } from "./conntrack.ts";
export { genlFamilyId, WG_MAX_REPLY, wgGetDevice, wgSetDevice } from "./wgkernel.ts";
export { WgNetlinkError } from "./codec/wgmsg.ts";
export type { WgDeviceConfig, WgDeviceDump, WgPeerConfig, WgPeerDump } from "./codec/wgmsg.ts";

/**
 * Opens a netlink handle in namespace `ns` (default: the one flanctl runs in). The socket is created
 * inside the namespace and the thread switched back at once. Throws NetnsNotFoundError for a missing
 * namespace. Close the handle with `close()`.
 */
export function openNetlink(ns?: NetnsRef | null): NetlinkHandle {
  return openLibnl(ns ?? null);
}
