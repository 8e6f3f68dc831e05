/**
 * Entry points of `flanctl trace` and `flanctl lab trace`: gather the nodes, resolve SRC/DST, trace,
 * optionally probe, release everything.
 * @module
 */
import { FlanctlError, UsageError } from "../base/errors.ts";
import { localSnapshotOptions } from "../observe/local_options.ts";
import type { StoreOptions } from "../store/open.ts";
import { LabNotFoundError, readState } from "../lab/state.ts";
import { flanctlCommand, runCmd } from "../lab/proc.ts";
import { underlayNetns } from "../lab/paths.ts";
import { readKubeRecord } from "../lab/kube_status.ts";
import type { KubeLabRecord } from "../lab/kube_status.ts";
import { kubectlCmd } from "../lab/kube.ts";
import {
  kubeLabNodes,
  kubeUnderlay,
  parseApiPods,
  resolveKubeDest,
  resolveKubeSource,
} from "./kube_nodes.ts";
import { closeNodes, labNodes, openNode, resolveLabDest, resolveLabSource } from "./nodes.ts";
import { probePath } from "./probe.ts";
import { trace } from "./trace.ts";
import { trace6 } from "./trace6.ts";
import type { PodRef, TraceInput, TraceReport } from "./types.ts";

/** Options of a local trace. */
export interface LocalTraceOptions extends StoreOptions {
  dst: string;
  from?: string;
  netns?: string;
  subnetFile: string;
  probe?: boolean;
}

async function withProbe(inp: TraceInput, rep: TraceReport, probe: boolean): Promise<TraceReport> {
  if (!probe) return rep;
  const { IPAddr } = await import("../base/cidr.ts");
  const dst = IPAddr.parse(inp.dst);
  // The pod network of the destination's family (an IPv6 probe checks against the IPv6 network).
  const net = dst.family === 6
    ? (await import("../observe/probes.ts")).network6(inp.src.node.ctx)
    : inp.src.node.ctx.network;
  if (!net || !net.contains(dst)) {
    rep.probe = `not sent: ${inp.dst} is outside the pod network ${net ?? "?"} (probes stay on the path)`;
    return rep;
  }
  const srcNs = "netns" in inp.src ? (inp.src as PodRef).netns : inp.src.node.netns;
  rep.probe = await probePath(srcNs, inp.dst, rep.devices);
  return rep;
}

/** `flanctl trace DST [--from SRC] [--netns NODE]` on this node. */
export async function localTrace(o: LocalTraceOptions): Promise<TraceReport> {
  const opts = localSnapshotOptions(o.netns ?? null, o.subnetFile, o);
  const node = await openNode(o.netns ?? Deno.hostname(), opts);
  try {
    let src: TraceInput["src"] = { node, ip: null, name: node.name };
    if (o.from) {
      const pod = [...node.ctx.pods.values()].find((p) => p.ips.includes(o.from!));
      if (pod) src = { name: pod.name, netns: pod.name, ip: o.from, node };
      else if (node.ctx.localIPs().has(o.from)) src = { node, ip: o.from, name: o.from };
      else {
        throw new UsageError(
          `--from: ${o.from} is neither a pod behind cni0 on ${node.name} nor one of its addresses`,
        );
      }
    }
    const inp: TraceInput = { src, dst: o.dst, dstName: o.dst, nodes: [node], pods: [] };
    return await withProbe(inp, await walk(inp), !!o.probe);
  } finally {
    closeNodes([node]);
  }
}

/**
 * Set in the re-executed child of an etcd lab's trace (it runs in the underlay namespace and prints the
 * whole report, probe included, as JSON for its parent).
 */
export const IN_UNDERLAY = "FLANCTL_LAB_TRACE_IN_UNDERLAY";

/**
 * `flanctl lab trace SRC DST`: every node of the lab. An etcd lab's and a --kube lab's trace runs in the
 * underlay namespace, where their store (etcd, the API server) listens.
 */
export async function labTrace(
  name: string,
  srcName: string,
  dstName: string,
  probe: boolean,
): Promise<TraceReport> {
  const s = readState(name);
  const k = s ? null : readKubeRecord(name);
  if (!s && !k) throw new LabNotFoundError(name);
  if ((k || s?.store === "etcd") && !Deno.env.get(IN_UNDERLAY)) {
    // etcd listens in the underlay namespace: run the trace there (netlink handles and iptables-save
    // reach every node's namespace by name from anywhere).
    const r = await runCmd(
      [
        "ip",
        "netns",
        "exec",
        underlayNetns(name),
        ...flanctlCommand(),
        "lab",
        "trace",
        "--name",
        name,
        ...(probe ? ["--probe"] : []),
        srcName,
        dstName,
      ],
      { env: { [IN_UNDERLAY]: "1" } },
    );
    if (r.code !== 0 && r.code !== 1) {
      throw new FlanctlError(r.stderr.trim().replace(/^flanctl: /, ""), r.code === 2 ? 2 : 1);
    }
    return JSON.parse(r.stdout) as TraceReport;
  }
  if (k) return await kubeLabTrace(k, srcName, dstName, probe);
  if (!s) throw new LabNotFoundError(name);
  const { nodes, pods } = await labNodes(s);
  try {
    const src = resolveLabSource(s, nodes, pods, srcName);
    const dst = resolveLabDest(s, pods, dstName);
    const underlay = {
      netns: s.underlay.netns,
      bridge: s.underlay.bridge,
      // Keyed by each node's PublicIP and PublicIPv6 (the IPv6 walk's underlay address).
      ports: new Map(
        s.nodes.flatMap((n) =>
          [n.publicIP, n.publicIPv6].filter((ip): ip is string => !!ip).map((ip) =>
            [ip, n.underlayVeth] as const
          )
        ),
      ),
    };
    const inp: TraceInput = { src, dst: dst.ip, dstName: dst.name, nodes, pods, underlay };
    return await withProbe(inp, await walk(inp), probe);
  } finally {
    closeNodes(nodes);
  }
}

/** `lab trace` on a --kube lab (in its underlay namespace): pods named by the API, found by their veths. */
async function kubeLabTrace(
  k: KubeLabRecord,
  srcName: string,
  dstName: string,
  probe: boolean,
): Promise<TraceReport> {
  const got = await runCmd(kubectlCmd(k.name, ["get", "pods", "-A", "-o", "json", "--request-timeout=10s"]));
  if (got.code !== 0) {
    throw new FlanctlError(`lab ${k.name}: the API server does not list pods (is the lab up?)`, 3);
  }
  const { nodes, pods } = await kubeLabNodes(k, parseApiPods(got.stdout));
  try {
    const src = resolveKubeSource(k, nodes, pods, srcName);
    const dst = resolveKubeDest(k, pods, dstName);
    const inp: TraceInput = { src, dst: dst.ip, dstName: dst.name, nodes, pods, underlay: kubeUnderlay(k) };
    return await withProbe(inp, await walk(inp), probe);
  } finally {
    closeNodes(nodes);
  }
}

/** IPv6 destinations take the IPv6 walk; everything else the IPv4 one. */
function walk(inp: TraceInput): Promise<TraceReport> {
  return inp.dst.includes(":") ? trace6(inp) : trace(inp);
}
