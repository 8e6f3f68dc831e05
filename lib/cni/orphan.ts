/**
 * DEL of an attachment whose saved delegate config is gone (a GC released it, which removes the config,
 * the host-local IPs and the masquerade chain but cannot reach into the pod's netns): the container's
 * interface is still there, and with it the host veth. It is removed when it is recognisably ours — a veth
 * in CNI_NETNS named CNI_IFNAME whose peer, in this (the host's) netns, is a veth that is a port of the
 * bridge the flannel delegate uses and points back at it. Anything else is left alone.
 * @module
 */
import type { NetlinkHandle } from "../netlink/types.ts";
import { checkNsFile } from "../base/capped_read.ts";

/** Removes `ifname` in `netns` when it is a veth whose host end is a port of `bridge`. True if removed. */
export async function deleteOrphanVeth(netns: string, ifname: string, bridge: string): Promise<boolean> {
  if (!netns) return false;
  try {
    checkNsFile(netns);
  } catch {
    return false; // netns gone (or not a namespace): nothing left to remove
  }
  const nl = await import("../netlink/mod.ts");
  let pod: NetlinkHandle;
  try {
    pod = nl.openNetlink({ path: netns });
  } catch {
    return false;
  }
  const host = nl.openNetlink();
  try {
    const cont = pod.link(ifname);
    if (!cont || cont.kind !== "veth" || cont.parent === null) return false;
    const br = host.link(bridge);
    const peer = host.link(cont.parent);
    if (!br || br.kind !== "bridge" || !peer || peer.kind !== "veth") return false;
    if (peer.master !== br.index || peer.parent !== cont.index) return false;
    pod.deleteLink(cont.index); // the host end goes with it
    return true;
  } finally {
    pod.close();
    host.close();
  }
}
