/**
 * What `lab list` and `lab status` know of a `--kube` lab: its record (`kube.json` in the lab directory,
 * written by `lab up --kube` as the cluster is built: nodes, network, backend, proxy mode, the kubelets'
 * pids) and, for status, the API's view of nodes and pods (kubectl in the underlay namespace).
 * Untrusted input (the record and the API's answers) is validated and bounded; nothing is printed raw.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { renderTable as table } from "../base/ui/table.ts";
import { parseSubnetEnv } from "../node/subnet_env.ts";
import { labDir, underlayNetns } from "./paths.ts";
import { isOurProcess, runCmd } from "./proc.ts";

/** `kube.json`: what `lab up --kube` built. */
export interface KubeLabRecord {
  name: string;
  nodes: number;
  /** ipv4, or dual (`lab up --kube --ip-family dual`; records written before it are ipv4). */
  ipFamily: "ipv4" | "dual";
  /** The pod networks, comma-separated (kube-controller-manager's --cluster-cidr). */
  network: string;
  backend: string;
  proxyMode: string;
  createdAt: string;
  /** The kubelet of node i+1 (the pid `ip netns exec … start.sh` kept through its execs), or 0. */
  kubeletPids: number[];
}

/** The record's path (`dir`: the lab's directory). */
export function kubeRecordPath(name: string, dir = labDir(name)): string {
  return `${dir}/kube.json`;
}

/**
 * The net-conf.json `lab up --kube` applied (the manifest's ConfigMap), kept for the lab's readers that
 * open the API as flanctl's store (`lab trace`), as a node has it at /etc/kube-flannel/net-conf.json.
 */
export function kubeNetConfPath(name: string): string {
  return `${labDir(name)}/net-conf.json`;
}

/** Writes the record atomically (into `dir`, the lab's directory). */
export function writeKubeRecord(r: KubeLabRecord, dir = labDir(r.name)): void {
  const p = kubeRecordPath(r.name, dir);
  const tmp = `${p}.tmp${Deno.pid}`;
  Deno.writeTextFileSync(tmp, JSON.stringify(r, null, 2) + "\n");
  Deno.renameSync(tmp, p);
}

const clean = (v: unknown, max = 64): string =>
  typeof v === "string" ? v.slice(0, max).replace(/[^\x21-\x7e]/g, "?") : "?";

/**
 * The record of lab `name` (in `dir`, the lab's directory), or null when it is not a --kube lab. Throws on
 * a corrupt record.
 */
export function readKubeRecord(name: string, dir = labDir(name)): KubeLabRecord | null {
  const path = kubeRecordPath(name, dir);
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(text.slice(0, 65536));
  } catch (e) {
    throw new FlanctlError(`${path}: not valid JSON (${(e as Error).message})`, 1);
  }
  const nodes = Number(j.nodes);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 200) {
    throw new FlanctlError(`${path}: no valid node count`, 1);
  }
  const pids = Array.isArray(j.kubeletPids) ? j.kubeletPids.slice(0, nodes) : [];
  return {
    name,
    nodes,
    ipFamily: j.ipFamily === "dual" ? "dual" : "ipv4",
    network: clean(j.network),
    backend: clean(j.backend),
    proxyMode: clean(j.proxyMode),
    createdAt: clean(j.createdAt),
    kubeletPids: Array.from({ length: nodes }, (_, i) => {
      const p = Number(pids[i]);
      return Number.isInteger(p) && p > 0 ? p : 0;
    }),
  };
}

/** Whether node i's (1-based) kubelet is running (its recorded pid, still the lab's process). */
export function kubeletRunning(r: KubeLabRecord, i: number): boolean {
  const pid = r.kubeletPids[i - 1];
  return pid > 0 && isOurProcess(pid, `${labDir(r.name)}/`);
}

/** Pods with a network namespace on the nodes (sandboxes: hostNetwork pods have none). */
export function kubePodSandboxes(r: KubeLabRecord): number {
  let n = 0;
  for (let i = 1; i <= r.nodes; i++) {
    try {
      n += [...Deno.readDirSync(`${labDir(r.name)}/node${i}/netns`)].length;
    } catch { /* node not made yet */ }
  }
  return n;
}

/** One node of `lab status` on a --kube lab. */
export interface KubeNodeStatus {
  name: string;
  netns: string;
  ready: string;
  podCIDR: string;
  /** Every podCIDR of the node (IPv4, IPv6 in a dual-stack lab). */
  podCIDRs: string[];
  /** flanctl's subnet.env on the node. */
  subnet: string | null;
  /** Its FLANNEL_IPV6_SUBNET (dual stack). */
  subnetIPv6?: string;
  kubelet: "running" | "stopped";
}

/** One pod of `lab status` on a --kube lab. */
export interface KubePodStatus {
  namespace: string;
  name: string;
  node: string;
  phase: string;
  ip: string;
  /** Every address of the pod (status.podIPs: IPv4 and IPv6 in a dual-stack lab). */
  ips: string[];
  hostNetwork: boolean;
}

/** `lab status -o json` of a --kube lab. */
export interface KubeStatusJson {
  kube: true;
  ipFamily: "ipv4" | "dual";
  network: string;
  backend: string;
  proxyMode: string;
  nodes: KubeNodeStatus[];
  pods: KubePodStatus[];
}

// deno-lint-ignore no-explicit-any
type Any = any;

/** Up to 2 addresses or CIDRs from an API list (`pick` gets each item), each validated; none when not a list. */
export function addrList(v: unknown, pick: (x: Any) => unknown): string[] {
  if (!Array.isArray(v)) return [];
  return v.slice(0, 2).map(pick).filter((x): x is string =>
    typeof x === "string" && /^[0-9a-fA-F.:]{2,39}(\/[0-9]{1,3})?$/.test(x)
  );
}

/** The status of a --kube lab: the record, the nodes' files and kubelets, the API's nodes and pods. */
export async function kubeLabStatus(r: KubeLabRecord, kubectl: string): Promise<KubeStatusJson> {
  const get = async (what: string[]): Promise<Any[]> => {
    const out = await runCmd([
      "ip",
      "netns",
      "exec",
      underlayNetns(r.name),
      kubectl,
      "--kubeconfig",
      `${labDir(r.name)}/admin.kubeconfig`,
      "get",
      ...what,
      "-o",
      "json",
      "--request-timeout=10s",
    ]);
    if (out.code !== 0) return [];
    try {
      const items = JSON.parse(out.stdout).items;
      return Array.isArray(items) ? items.slice(0, 5000) : [];
    } catch {
      return [];
    }
  };
  const [apiNodes, apiPods] = await Promise.all([get(["nodes"]), get(["pods", "-A"])]);
  const nodes: KubeNodeStatus[] = [];
  for (let i = 1; i <= r.nodes; i++) {
    const name = `node${i}`;
    const n = apiNodes.find((x) => x?.metadata?.name === name);
    const ready = n?.status?.conditions?.find?.((c: Any) => c?.type === "Ready")?.status;
    let subnet: string | null = null;
    let subnetIPv6: string | undefined;
    try {
      const env = parseSubnetEnv(Deno.readTextFileSync(`${labDir(r.name)}/${name}/run-flannel/subnet.env`));
      subnet = env.subnet ? env.subnet.net.toString() : null;
      subnetIPv6 = env.ipv6Subnet?.net.toString();
    } catch { /* not written yet */ }
    nodes.push({
      name,
      netns: `${r.name}-${name}`,
      ready: n ? (ready === "True" ? "Ready" : "NotReady") : "absent",
      podCIDR: n ? clean(n.spec?.podCIDR) : "-",
      podCIDRs: n ? addrList(n.spec?.podCIDRs, (c) => c) : [],
      subnet,
      ...(subnetIPv6 ? { subnetIPv6 } : {}),
      kubelet: kubeletRunning(r, i) ? "running" : "stopped",
    });
  }
  const pods = apiPods.map((p) => ({
    namespace: clean(p?.metadata?.namespace),
    name: clean(p?.metadata?.name, 253),
    node: clean(p?.spec?.nodeName ?? "-"),
    phase: clean(p?.status?.phase ?? "-"),
    ip: clean(p?.status?.podIP ?? "-"),
    ips: addrList(p?.status?.podIPs, (x) => x?.ip),
    hostNetwork: p?.spec?.hostNetwork === true,
  }));
  return {
    kube: true,
    ipFamily: r.ipFamily,
    network: r.network,
    backend: r.backend,
    proxyMode: r.proxyMode,
    nodes,
    pods,
  };
}

/** `lab status` of a --kube lab as tables. */
export function formatKubeStatus(r: KubeLabRecord, st: KubeStatusJson): string {
  const nodes = table(
    ["NODE", "NETNS", "STATUS", "PODCIDR", "SUBNET", "KUBELET"],
    st.nodes.map((n) => [
      n.name,
      n.netns,
      n.ready,
      n.podCIDRs.length ? n.podCIDRs.join(",") : n.podCIDR,
      [n.subnet ?? "-", ...(n.subnetIPv6 ? [n.subnetIPv6] : [])].join(","),
      n.kubelet,
    ]),
  );
  const pods = table(
    ["NAMESPACE", "POD", "NODE", "PHASE", "IP"],
    st.pods.map((p) => {
      const ip = p.ips.length ? p.ips.join(",") : p.ip;
      return [p.namespace, p.name, p.node, p.phase, p.hostNetwork ? `${ip} (host)` : ip];
    }),
  );
  return `lab ${r.name} (--kube${r.ipFamily === "dual" ? " --ip-family dual" : ""}): backend ${r.backend}, ` +
    `network ${r.network}, kube-proxy ${r.proxyMode}\n\n` +
    `${nodes}\n\n${st.pods.length ? pods : "(no pods, or the API server does not answer)"}`;
}
