/**
 * The remote node's segment of a traced path, the same for the IPv4 and the IPv6 walk: the lab's
 * underlay bridge, the peer's daemon, the family's and backend's ingress hops (decapsulation, the route
 * to cni0, FORWARD), then delivery to the destination pod. A peer whose state is not readable ends the
 * path at its public address.
 * @module
 */
import { daemonHop, underlayBridgeHop, unreadableRemoteHop } from "./hops.ts";
import type { Path } from "./path.ts";
import { deliver } from "./pod.ts";
import type { TraceInput, TraceNode } from "./types.ts";

/** Walks the remote node's segment (after the underlay route on the source node). */
export async function remoteNode(
  o: {
    inp: TraceInput;
    /** The source node. */
    src: TraceNode;
    /** The node holding the destination's lease, when its state can be read here. */
    peer: TraceNode | null;
    /** The lease's public address (PublicIP or PublicIPv6), where an unreadable peer's path ends. */
    publicIP: string;
    /** The lease as the hops name it. */
    lease: string;
    /** The address the underlay carries the packet to (the FDB entry's, else the public address). */
    underlayDst: string;
    /** The family's and backend's ingress hops on the peer, up to its FORWARD verdict. */
    ingress: (peer: TraceNode) => Promise<void>;
  },
  p: Path,
): Promise<void> {
  const { inp, peer } = o;
  if (!peer) {
    unreadableRemoteHop(o.publicIP, o.lease, p);
    return;
  }
  if (inp.underlay) underlayBridgeHop(inp.underlay, o.src, peer, o.underlayDst, p);
  await daemonHop(peer, p);
  // A dead remote daemon is the verdict, but the rest of the path is still shown.
  const mark = p.hops.length;
  await o.ingress(peer);
  if (p.hops.slice(mark).every((h) => h.ok)) await deliver(inp, peer, p);
}
