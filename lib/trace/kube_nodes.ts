/**
 * `flanctl lab trace` on a `--kube` lab: its nodes (each node's namespace, its files in the lab directory
 * where the kubelet's mount namespace binds them, the API as flanctl's DaemonSet's store) and its pods. The
 * pods are the ones containerd made: their namespaces are unnamed on the host (the CRI plugin mounts them
 * under the node's private /run/netns), so each is found by pairing the node's cni0 veths across every
 * namespace of the host (`pid:N`, as the doctor finds them), and named by the API (`kubectl get pods`: the
 * pod whose podIPs the namespace holds). Read-only; untrusted answers (the API's) are validated and bounded.
 * @module
 */
import { UsageError } from "../base/errors.ts";
import { openStore } from "../store/open.ts";
import type { SnapshotOptions } from "../observe/snapshot.ts";
import { labDir, underlayAddrs, underlayNetns } from "../lab/paths.ts";
import { underlayAddrs6 } from "../lab/family.ts";
import { kubeNetConfPath } from "../lab/kube_status.ts";
import type { KubeLabRecord } from "../lab/kube_status.ts";
import { closeNodes, openNode } from "./nodes.ts";
import type { LabUnderlay, PodRef, TraceNode } from "./types.ts";

/** A pod as the API names it: `namespace/name`, its node and its addresses (IPv4 first). */
export interface ApiPod {
  name: string;
  node: string;
  ips: string[];
}

/** The doctor options of node `i` (1-based) of a --kube lab: its namespace, its files, the API. */
export function kubeNodeOptions(r: KubeLabRecord, i: number): SnapshotOptions {
  const d = `${labDir(r.name)}/node${i}`;
  return {
    netns: `${r.name}-node${i}`,
    subnetFile: `${d}/run-flannel/subnet.env`,
    cniConfDir: `${d}/cni-conf`,
    cniBinDir: `${d}/cni-bin`,
    hostLocalDir: `${d}/var-lib-cni/networks`,
    flannelDataDir: `${d}/var-lib-cni/flannel`,
    cniResultsDir: `${d}/var-lib-cni/results`,
    podNetnsPrefix: "cni-",
    readyzUrl: null,
    probe: false,
    openStore: () =>
      openStore({
        kubeSubnetMgr: true,
        kubeconfigFile: `${labDir(r.name)}/admin.kubeconfig`,
        nodeName: `node${i}`,
        netConfigPath: kubeNetConfPath(r.name),
      }),
    storeExplicit: true,
    skip: new Set(),
    // The sandboxes are found through the kernel (veth pairs); the CRI is not asked.
    criSocket: null,
  };
}

const IP = /^([0-9]{1,3}(\.[0-9]{1,3}){3}|[0-9a-f]{0,4}(:[0-9a-f]{0,4}){2,7})$/;
const NAME = /^[a-z0-9][a-z0-9.-]{0,252}$/;

/** The pods of `kubectl get pods -A -o json` (not hostNetwork), validated; at most 5000. */
export function parseApiPods(json: string): ApiPod[] {
  let items: unknown;
  try {
    items = JSON.parse(json.slice(0, 32 << 20))?.items;
  } catch {
    return [];
  }
  if (!Array.isArray(items)) return [];
  const out: ApiPod[] = [];
  // deno-lint-ignore no-explicit-any
  for (const p of items.slice(0, 5000) as any[]) {
    const ns = p?.metadata?.namespace, name = p?.metadata?.name, node = p?.spec?.nodeName;
    if (p?.spec?.hostNetwork === true) continue;
    if (![ns, name, node].every((x) => typeof x === "string" && NAME.test(x))) continue;
    const ips = Array.isArray(p?.status?.podIPs)
      ? p.status.podIPs.slice(0, 2).map((x: { ip?: unknown }) => x?.ip).filter((x: unknown) =>
        typeof x === "string" && IP.test(x)
      )
      : [];
    if (ips.length) out.push({ name: `${ns}/${name}`, node, ips });
  }
  return out;
}

/**
 * The lab's pods by name: each API pod on a node whose cni0 has a namespace holding its addresses (the
 * namespace's `pid:N` label as the trace opens it).
 */
export function matchPods(api: ApiPod[], nodes: TraceNode[]): PodRef[] {
  const pods: PodRef[] = [];
  for (const a of api) {
    const node = nodes.find((n) => n.name === a.node);
    if (!node) continue;
    const ns = [...node.ctx.pods.values()].find((p) => a.ips.some((ip) => p.ips.includes(ip)));
    if (!ns) continue;
    const v4 = a.ips.find((ip) => !ip.includes(":")), v6 = a.ips.find((ip) => ip.includes(":"));
    pods.push({ name: a.name, netns: ns.name, ip: v4 ?? v6!, ...(v6 ? { ipv6: v6 } : {}), node });
  }
  return pods;
}

/** Every node of a --kube lab (`api`: its pods from the API). */
export async function kubeLabNodes(
  r: KubeLabRecord,
  api: ApiPod[],
): Promise<{ nodes: TraceNode[]; pods: PodRef[] }> {
  const nodes: TraceNode[] = [];
  try {
    for (let i = 1; i <= r.nodes; i++) nodes.push(await openNode(`node${i}`, kubeNodeOptions(r, i)));
  } catch (e) {
    closeNodes(nodes);
    throw e;
  }
  return { nodes, pods: matchPods(api, nodes) };
}

/** The lab's underlay: br0 in the underlay namespace, node i's port `u-node<i>` by its IPv4 and IPv6. */
export function kubeUnderlay(r: KubeLabRecord): LabUnderlay {
  const u4 = underlayAddrs(r.name), u6 = underlayAddrs6(r.name);
  const ports = new Map<string, string>();
  for (let i = 1; i <= r.nodes; i++) {
    ports.set(u4.nodeIP(i), `u-node${i}`);
    if (r.ipFamily === "dual") ports.set(u6.nodeIP(i), `u-node${i}`);
  }
  return { netns: underlayNetns(r.name), bridge: "br0", ports };
}

function known(r: KubeLabRecord, pods: PodRef[]): string {
  const names = [...pods.map((p) => p.name), ...Array.from({ length: r.nodes }, (_, i) => `node${i + 1}`)];
  return names.slice(0, 30).join(", ") + (names.length > 30 ? ", …" : "");
}

/** A pod by `namespace/name`, by its name alone when that is unique, or by one of its addresses. */
function findPod(pods: PodRef[], name: string): PodRef | undefined {
  const exact = pods.find((p) => p.name === name || p.ip === name || p.ipv6 === name);
  if (exact) return exact;
  const short = pods.filter((p) => p.name.split("/")[1] === name);
  return short.length === 1 ? short[0] : undefined;
}

/** The trace's source on a --kube lab: a pod (name or address) or a node (name or IPv4). */
export function resolveKubeSource(
  r: KubeLabRecord,
  nodes: TraceNode[],
  pods: PodRef[],
  name: string,
): PodRef | { node: TraceNode; ip: string | null; name: string } {
  const pod = findPod(pods, name);
  if (pod) return pod;
  const u4 = underlayAddrs(r.name);
  const node = nodes.find((n, i) => n.name === name || u4.nodeIP(i + 1) === name);
  if (node) return { node, ip: null, name: node.name };
  throw new UsageError(`SRC: '${name}' is no pod or node of lab ${r.name}; give one of ${known(r, pods)}`);
}

/** The destination on a --kube lab: a pod (its IPv4), a node (its IPv4) or any IPv4 or IPv6 address. */
export function resolveKubeDest(
  r: KubeLabRecord,
  pods: PodRef[],
  name: string,
): { ip: string; name: string } {
  const byName = pods.find((p) => p.name === name) ??
    (pods.filter((p) => p.name.split("/")[1] === name).length === 1
      ? pods.find((p) => p.name.split("/")[1] === name)
      : undefined);
  if (byName) return { ip: byName.ip, name: byName.name };
  const i = Number(/^node([1-9][0-9]{0,2})$/.exec(name)?.[1]);
  if (i && i <= r.nodes) return { ip: underlayAddrs(r.name).nodeIP(i), name };
  if (IP.test(name)) {
    const pod = pods.find((p) => p.ip === name || p.ipv6 === name);
    return { ip: name, name: pod ? `${pod.name} (${name})` : name };
  }
  throw new UsageError(
    `DST: '${name}' is no pod, node or address of lab ${r.name}; give one of ${known(r, pods)}`,
  );
}
