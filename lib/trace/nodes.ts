/**
 * The nodes a trace reads: this node (or `--netns NODE`) with the doctor's gathered state, or every node
 * of a lab (each node's namespace, its files in the lab directory, the lab's store), plus the pods known
 * by name. Read-only; `closeNodes` releases the netlink handles.
 * @module
 */
import { gatherSnapshot, type SnapshotOptions } from "../observe/snapshot.ts";
import { FileStoreReader } from "../store/file/file_reader.ts";
import { openStore } from "../store/open.ts";
import { openNetlink } from "../netlink/mod.ts";
import { FlanctlError, UsageError } from "../base/errors.ts";
import type { LabState } from "../lab/types.ts";
import type { PodRef, TraceNode } from "./types.ts";

/** Gathers one node. */
export async function openNode(name: string, opts: SnapshotOptions): Promise<TraceNode> {
  const ctx = await gatherSnapshot(opts);
  if (ctx.fatal.length) throw new TraceNodeError(name, ctx.fatal.join("; "));
  const h = openNetlink(opts.netns ? { name: opts.netns } : null);
  return { name, netns: opts.netns, ctx, h };
}

/** Closes every node's handle. */
export function closeNodes(nodes: TraceNode[]): void {
  for (const n of nodes) n.h.close();
}

/** A node whose state cannot be read. */
export class TraceNodeError extends FlanctlError {
  constructor(node: string, detail: string) {
    super(`cannot read node ${node}: ${detail}`, 3);
  }
}

/** The doctor options of lab node `node`: its namespace and its files in the lab directory. */
export function labNodeOptions(s: LabState, node: LabState["nodes"][number]): SnapshotOptions {
  const d = node.dir;
  const storeDir = s.store === "file" ? `${s.dir}/store` : null;
  return {
    netns: node.netns,
    subnetFile: `${d}/run/flannel/subnet.env`,
    cniConfDir: `${d}/etc/cni/net.d`,
    cniBinDir: `${s.dir}/cni-bin`,
    hostLocalDir: `${d}/var/lib/cni/networks`,
    flannelDataDir: `${d}/var/lib/cni/flannel`,
    cniResultsDir: `${d}/var/lib/cni/results`,
    podNetnsPrefix: `${node.netns}-pod`,
    readyzUrl: null,
    probe: false,
    openStore: storeDir
      ? () => Promise.resolve(new FileStoreReader(storeDir))
      : () => openStore({ etcdEndpoints: s.storeFlags[s.storeFlags.indexOf("--etcd-endpoints") + 1] }),
    storeExplicit: true,
    skip: new Set(),
    // A lab node's own containerd (--runtime containerd); else none: a host's would not know its pods.
    criSocket: s.runtime === "containerd" ? `${d}/containerd/containerd.sock` : null,
    wgSocketDir: `${d}/run/wireguard`,
  };
}

/** Every node of a lab and its pods by name. */
export async function labNodes(s: LabState): Promise<{ nodes: TraceNode[]; pods: PodRef[] }> {
  const nodes: TraceNode[] = [];
  try {
    for (const n of s.nodes) nodes.push(await openNode(n.name, labNodeOptions(s, n)));
  } catch (e) {
    closeNodes(nodes);
    throw e;
  }
  const pods: PodRef[] = [];
  for (const p of s.pods) {
    const node = nodes.find((n) => n.name === p.node);
    if (node && (p.ip || p.ipv6)) {
      pods.push({
        name: p.name,
        netns: p.netns,
        ip: p.ip ?? p.ipv6!,
        ...(p.ipv6 ? { ipv6: p.ipv6 } : {}),
        node,
      });
    }
  }
  return { nodes, pods };
}

/** Resolves a lab name (pod or node) or an address to the trace's source. */
export function resolveLabSource(
  s: LabState,
  nodes: TraceNode[],
  pods: PodRef[],
  name: string,
): PodRef | { node: TraceNode; ip: string | null; name: string } {
  const pod = pods.find((p) => p.name === name || p.ip === name);
  if (pod) return pod;
  const ln = s.nodes.find((n) => n.name === name || n.publicIP === name);
  const node = ln ? nodes.find((n) => n.name === ln.name) : undefined;
  if (node) return { node, ip: null, name: node.name };
  throw new UsageError(
    `SRC: '${name}' is no pod or node of lab ${s.name}; give one of ${
      [...s.pods.map((p) => p.name), ...s.nodes.map((n) => n.name)].join(", ")
    }`,
  );
}

/** Resolves a lab name (pod → its IP, node → its PublicIP) or an IPv4 address to the destination. */
export function resolveLabDest(s: LabState, pods: PodRef[], name: string): { ip: string; name: string } {
  const pod = pods.find((p) => p.name === name);
  if (pod) return { ip: pod.ip, name };
  const n = s.nodes.find((n) => n.name === name);
  if (n) return { ip: n.publicIP, name };
  const pod6 = pods.find((p) => p.ipv6 === name);
  if (pod6) return { ip: name, name: `${pod6.name} (${name})` };
  if (/^\d+\.\d+\.\d+\.\d+$/.test(name)) return { ip: name, name };
  throw new UsageError(
    `DST: '${name}' is no pod, node or IPv4 address of lab ${s.name}; give one of ${
      [...s.pods.map((p) => p.name), ...s.nodes.map((n) => n.name)].join(", ")
    }`,
  );
}
