/**
 * Shapes of `flanctl trace`: what to trace (and whether it starts in a pod), one hop of a packet's path,
 * the report (its `-o json` view is exactly {@link TraceJson}), and the nodes whose live state the trace
 * reads.
 * @module
 */
import type { NodeSnapshot } from "../observe/snapshot.ts";
import type { NetlinkHandle } from "../netlink/types.ts";

/** One hop: where the packet is, the kernel entry that decided where it goes next, and the verdict. */
export interface TraceHop {
  /** Node (or pod) whose state decided this hop. */
  node: string;
  /** Stable step name: pod-route, veth, cni0-port, daemon, host-route, forward, masquerade, … */
  step: string;
  ok: boolean;
  /** The entry that decided it, as the kernel holds it (a route, ARP/FDB entry, link, rule). */
  entry: string;
  /** What it means; for a broken hop, what is wrong and where the state disagrees with the lease. */
  detail: string;
  /** The lease that explains this hop (peer subnet → node, PublicIP, VtepMAC), when one does. */
  lease?: string;
}

/** The `-o json` document of `flanctl trace` (the contract: these keys, no others). */
export interface TraceJson {
  ok: boolean;
  src: string;
  dst: string;
  hops: TraceHop[];
  /** Index in `hops` of the first broken hop. */
  brokenAt?: number;
  /** Why the first broken hop breaks the path (the doctor's text where a doctor check covers it). */
  why?: string;
  /** Commands that fix it. */
  fix?: string[];
}

/** A trace result: the JSON view plus what the table needs. */
export interface TraceReport extends TraceJson {
  /** The doctor check whose text explains the broken hop, if any. */
  check?: string;
  /** `--probe`: where the one ping was last seen, or why it was not sent. */
  probe?: string;
  /** Devices the packet passes, in order (what `--probe` reads counters of). */
  devices: PathDevice[];
}

/** A device on the path and the direction the packet crosses it. */
export interface PathDevice {
  netns: string | null;
  dev: string;
  /** "tx": the packet leaves through it; "rx": it arrives on it. */
  dir: "rx" | "tx";
}

/** A node whose state the trace reads: its gathered doctor context and a netlink handle on its netns. */
export interface TraceNode {
  /** Display name ("node1", or the host name / netns for a local trace). */
  name: string;
  /** Its network namespace (null: the one flanctl runs in). */
  netns: string | null;
  ctx: NodeSnapshot;
  h: NetlinkHandle;
}

/** A pod the trace knows by name (lab) or found behind a node's cni0. */
export interface PodRef {
  /** Display name (lab pod name, or its netns). */
  name: string;
  netns: string;
  ip: string;
  /** Its IPv6 address, in dual-stack and IPv6-only networks. */
  ipv6?: string;
  /** The node it runs on. */
  node: TraceNode;
}

/** A lab's underlay: its namespace, bridge and each node's port on it (by PublicIP and PublicIPv6). */
export interface LabUnderlay {
  netns: string;
  bridge: string;
  ports: Map<string, string>;
}

/** What to trace. */
export interface TraceInput {
  /** A pod, or a node (then the packet starts in the node's own stack). */
  src: PodRef | { node: TraceNode; ip: string | null; name: string };
  /** Destination address. */
  dst: string;
  /** Display name of the destination (pod/node name in a lab), or the address. */
  dstName: string;
  /** Every node whose state can be read (the source's node included). */
  nodes: TraceNode[];
  /** Pods known by name (lab); others are found behind each node's cni0. */
  pods: PodRef[];
  /** A lab's underlay: its namespace, bridge and each node's port on it (by PublicIP). */
  underlay?: LabUnderlay;
}

/** Whether the packet starts in a pod (else in a node's own stack). */
export function isPod(s: TraceInput["src"]): s is PodRef {
  return "netns" in s;
}
