/**
 * `flanctl lab up` and `flanctl lab add-node`: underlay namespace with a bridge, node namespaces on it
 * (veth, public IP, default route via the bridge address), the network config in the store, one daemon
 * per node, then pod namespaces attached by the flannel CNI plugin. Each thing is recorded in the state
 * file before it is made; any failure or abort leaves a state that `lab down` fully undoes.
 * @module
 */
import { FlanctlError, UsageError } from "../base/errors.ts";
import { readCappedText } from "../base/capped_read.ts";
import { IPNet } from "../base/cidr.ts";
import { ensureMountPoints } from "./exec.ts";
import { labDir, labRoot, nodeNetns, underlayAddrs, underlayNetns, validateLabName } from "./paths.ts";
import { attachPod, writeCniBin } from "./pods.ts";
import { checkRuntime, criAddPod, ensureNodeRuntime } from "./runtime.ts";
import { conflistPath, labConflist } from "./conflist.ts";
import { parseNetConfig } from "../config/netconf.ts";
import { flanctlCommand, inNs, mustRun, runCmd } from "./proc.ts";
import {
  ETCD_BIN,
  etcdEndpoint,
  labWireguardGo,
  startDaemon,
  startEtcd,
  waitDaemonReady,
} from "./services.ts";
import { readState, saveState } from "./state.ts";
import { applyTuning, checkHostFits, fitNotes, labFamilies, tuningFor } from "./host_size.ts";
import { pool } from "./check.ts";
import type { LabBackend, LabState, LabUpOptions, NodeState, PodState } from "./types.ts";
import {
  addNodeV6,
  addUnderlayV6,
  hasV6,
  type LabIpFamily,
  labNetConfFor,
  underlayAddrs6,
  validateIpFamily,
  waitBridgesSettled,
} from "./family.ts";
import { pathExists } from "../base/exists.ts";

/** Progress callback (one line per step). */
export type Progress = (line: string) => void;

/** The lab already exists. */
export class LabExistsError extends FlanctlError {
  constructor(name: string) {
    super(
      `lab '${name}' already exists; remove it with 'flanctl lab down --name ${name}' or pick another --name`,
      1,
    );
  }
}

/** Nodes (and pods of different nodes) made at a time. */
const BUILD_PARALLEL = 4;

/** Most nodes of a lab (its underlay is a /24: node i is .10+i). */
export const MAX_NODES = 200;

/** Port of every daemon's /healthz and /readyz (each daemon has its own namespace). */
export const LAB_HEALTHZ_PORT = 10251;

/** The backends `lab up --backend` takes. */
export const LAB_BACKENDS: readonly LabBackend[] = [
  "vxlan",
  "host-gw",
  "udp",
  "wireguard",
  "alloc",
  "extension",
];

/** Checks `lab up` options; throws a UsageError naming the flag. */
export function validateUpOptions(o: LabUpOptions): void {
  validateLabName(o.name);
  if (!Number.isInteger(o.nodes) || o.nodes < 1 || o.nodes > MAX_NODES) {
    throw new UsageError(`--nodes ${o.nodes}: give a whole number from 1 to ${MAX_NODES}`);
  }
  if (!Number.isInteger(o.podsPerNode) || o.podsPerNode < 0 || o.podsPerNode > 50) {
    throw new UsageError(`--pods-per-node ${o.podsPerNode}: give a whole number from 0 to 50`);
  }
  if (!LAB_BACKENDS.includes(o.backend)) {
    throw new UsageError(`--backend '${o.backend}': use ${LAB_BACKENDS.join(", ")}`);
  }
  if (o.leaseTtl !== undefined && (!Number.isInteger(o.leaseTtl) || o.leaseTtl < 5 || o.leaseTtl > 86400)) {
    throw new UsageError(`--lease-ttl ${o.leaseTtl}: give whole seconds from 5 to 86400`);
  }
  for (const a of o.daemonArgs ?? []) {
    if (!a.startsWith("--")) {
      throw new UsageError(`--daemon-arg '${a}': give a daemon flag, e.g. --daemon-arg=--log-level=debug`);
    }
  }
  if (o.store !== "file" && o.store !== "etcd") {
    throw new UsageError(`--store '${o.store}': use file or etcd`);
  }
  if (o.runtime !== undefined && o.runtime !== "none" && o.runtime !== "containerd") {
    throw new UsageError(`--runtime '${o.runtime}': use none or containerd`);
  }
  if (o.runtime === "containerd") checkRuntime();
  if (o.wireguardWay !== undefined && !["kernel", "userspace", "auto"].includes(o.wireguardWay)) {
    throw new UsageError(`--wireguard-way '${o.wireguardWay}': use kernel, userspace or auto`);
  }
  // With --net-conf the backend is the file's: checked again once it is read (labUp).
  if (o.wireguardWay && o.wireguardWay !== "auto" && o.backend !== "wireguard" && !o.netConf) {
    throw new UsageError(
      `--wireguard-way ${o.wireguardWay}: only for --backend wireguard (this lab: ${o.backend})`,
    );
  }
  validateIpFamily(o.ipFamily);
  if (o.backend === "udp" && o.ipFamily && o.ipFamily !== "ipv4") {
    throw new UsageError(
      `--ip-family ${o.ipFamily}: the udp backend carries IPv4 only (as flannel's); use vxlan or host-gw`,
    );
  }
  let net: IPNet | null = null;
  try {
    net = IPNet.parse(o.network, "--network");
  } catch { /* reported below */ }
  if (!net || net.toString().includes(":") || net.prefix > 28) {
    throw new UsageError(
      `--network '${o.network}': give an IPv4 CIDR of /28 or larger, such as 10.244.0.0/16`,
    );
  }
}

/** The net-conf.json the lab writes into its store. */
export function labNetConf(s: LabState): string {
  return s.netConf ?? labNetConfFor(s);
}

/** True when the lab's net-conf has EnableNFTables (portmap then uses its nftables backend too). */
export function nftablesMode(s: LabState): boolean {
  return s.netConf ? parseNetConfig(s.netConf).enableNFTables : false;
}

/**
 * Reads and checks `lab up --net-conf FILE`: any net-conf flanneld takes with a backend the lab builds.
 * The address families come from the file (EnableIPv4/EnableIPv6): IPv4, dual stack or IPv6-only; a
 * different `--ip-family` than ipv4 (the default) must agree with it. Returns its text, IPv4 network (the
 * `--network` default when IPv4 is off), backend and family.
 */
export function readLabNetConf(
  file: string,
  o: { network: string; ipFamily?: LabIpFamily } = { network: "10.244.0.0/16" },
): { text: string; network: string; backend: LabUpOptions["backend"]; ipFamily: LabIpFamily } {
  let text: string;
  try {
    text = readCappedText(file);
  } catch (e) {
    throw new UsageError(`--net-conf ${file}: cannot read it (${(e as Error).message})`);
  }
  let cfg;
  try {
    cfg = parseNetConfig(text);
  } catch (e) {
    throw new UsageError(`--net-conf ${file}: ${(e as Error).message}`);
  }
  const type = cfg.backend.type;
  const ipFamily: LabIpFamily = !cfg.enableIPv6 ? "ipv4" : cfg.enableIPv4 ? "dual" : "ipv6";
  if (cfg.enableIPv4 && !cfg.network) {
    throw new UsageError(`--net-conf ${file}: the lab needs an IPv4 Network`);
  }
  if (!(LAB_BACKENDS as readonly string[]).includes(type)) {
    throw new UsageError(
      `--net-conf ${file}: Backend.Type '${type}': the lab builds ${LAB_BACKENDS.join(", ")}`,
    );
  }
  if (type === "udp" && cfg.enableIPv6) {
    throw new UsageError(
      `--net-conf ${file}: Backend.Type 'udp' carries IPv4 only (as flannel's): set EnableIPv6 false`,
    );
  }
  if (o.ipFamily && o.ipFamily !== "ipv4" && o.ipFamily !== ipFamily) {
    throw new UsageError(
      `--ip-family ${o.ipFamily}: --net-conf ${file} is ${ipFamily} (EnableIPv4/EnableIPv6); ` +
        "leave --ip-family out or make the two agree",
    );
  }
  return {
    text: text.trim(),
    network: cfg.network?.toString() ?? o.network,
    backend: type as LabBackend,
    ipFamily,
  };
}

/** Creates a namespace (recorded first) with lo up. */
async function addNetns(s: LabState, name: string): Promise<void> {
  if (!s.netns.includes(name)) s.netns.push(name);
  saveState(s);
  await mustRun(["ip", "netns", "add", name]);
  await mustRun(["ip", "-n", name, "link", "set", "lo", "up"]);
}

async function buildUnderlay(s: LabState): Promise<void> {
  const u = s.underlay;
  await addNetns(s, u.netns);
  await mustRun(["ip", "-n", u.netns, "link", "add", u.bridge, "type", "bridge"]);
  await mustRun([
    "ip",
    "-n",
    u.netns,
    "addr",
    "add",
    `${u.gateway}/${u.cidr.split("/")[1]}`,
    "dev",
    u.bridge,
  ]);
  await mustRun(["ip", "-n", u.netns, "link", "set", u.bridge, "up"]);
  // The underlay stands for the physical network between hosts: a switch runs no iptables, so frames
  // crossing br0 skip br_netfilter here (best effort: the keys exist only with br_netfilter loaded).
  await runCmd(inNs(u.netns, [
    "sysctl",
    "-qw",
    "net.bridge.bridge-nf-call-iptables=0",
    "net.bridge.bridge-nf-call-ip6tables=0",
    "net.bridge.bridge-nf-call-arptables=0",
  ]));
  if (hasV6(s)) await addUnderlayV6(s);
}

/** Creates node `index` (namespace, veth to the underlay, address, default route, dirs). */
async function buildNode(s: LabState, index: number): Promise<NodeState> {
  const name = `node${index}`;
  const n: NodeState = {
    name,
    netns: nodeNetns(s.name, name),
    publicIP: underlayAddrs(s.name).nodeIP(index),
    underlayVeth: `u-${name}`,
    dir: `${s.dir}/${name}`,
  };
  s.nodes.push(n);
  for (const d of ["run/flannel", "run/wireguard", "etc/cni/net.d", "var/lib/cni", "var/lib/flanctl/state"]) {
    Deno.mkdirSync(`${n.dir}/${d}`, { recursive: true });
  }
  Deno.writeTextFileSync(conflistPath(n), JSON.stringify(labConflist(nftablesMode(s)), null, 2) + "\n");
  await addNetns(s, n.netns);
  const u = s.underlay;
  const prefix = u.cidr.split("/")[1];
  // One `ip -batch` per namespace (each line as its own `ip` command did; the first failure stops it).
  await mustRun(["ip", "-n", u.netns, "-batch", "-"], {
    stdin: `link add ${n.underlayVeth} type veth peer name eth0 netns ${n.netns}\n` +
      `link set ${n.underlayVeth} master ${u.bridge} up\n`,
  });
  await mustRun(["ip", "-n", n.netns, "-batch", "-"], {
    stdin: `addr add ${n.publicIP}/${prefix} dev eth0\nlink set eth0 up\n` +
      `route add default via ${u.gateway} dev eth0\n`,
  });
  // A node forwards pod traffic (a new namespace starts with forwarding off).
  await mustRun(inNs(n.netns, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]));
  if (hasV6(s)) {
    await addNodeV6(s, n, index);
    saveState(s);
  }
  return n;
}

/** Creates and attaches pod `index` on node `n` (with hostPort mappings `ports`). */
export async function buildPod(
  s: LabState,
  n: NodeState,
  index: number,
  ports?: PodState["ports"],
): Promise<PodState> {
  const name = `${n.name}-pod${index}`;
  const pod: PodState = { name, node: n.name, netns: `${s.name}-${name}`, containerId: `${s.name}-${name}` };
  if (ports?.length) pod.ports = ports;
  s.pods.push(pod);
  let ips: { ip: string | null; ipv6: string | null };
  if (s.runtime === "containerd") {
    // The sandbox's netns gets the pod's name (recorded first, so `lab down` drops the name).
    if (!s.netns.includes(pod.netns)) s.netns.push(pod.netns);
    saveState(s);
    await ensureNodeRuntime(s, n);
    ips = await criAddPod(s, n, pod);
  } else {
    await addNetns(s, pod.netns);
    ips = await attachPod(s, n, pod);
  }
  if (ips.ip) pod.ip = ips.ip;
  if (ips.ipv6) pod.ipv6 = ips.ipv6;
  saveState(s);
  return pod;
}

/** Writes the lab's network config into its store with `flanctl lease config set`. */
async function writeNetConf(s: LabState): Promise<void> {
  const file = `${s.dir}/net-conf.json`;
  Deno.writeTextFileSync(file, labNetConf(s) + "\n");
  await mustRun(
    inNs(s.underlay.netns, [...flanctlCommand(), "lease", "config", "set", file, ...s.storeFlags]),
  );
}

/** Starts daemons on `nodes` (without waiting for them: see {@link readyThenPods}). */
async function startDaemons(s: LabState, nodes: NodeState[], progress: Progress) {
  // Each start is a detached shell (setsid): 8 at a time.
  await pool(nodes, 8, (n) => startDaemon(s, n));
  const which = nodes.length > 10 ? `${nodes.length} nodes` : nodes.map((n) => n.name).join(", ");
  progress(`daemons started on ${which}; waiting for subnet.env and /readyz`);
}

/**
 * Builds a whole lab. On failure the state is left for `lab down` (the CLI calls it); `made` turns true
 * once this call owns the lab directory, i.e. once there is something of this call's to undo.
 */
export async function labUp(
  o: LabUpOptions,
  progress: Progress,
  signal?: AbortSignal,
  made: { value: boolean } = { value: false },
): Promise<LabState> {
  const nc = o.netConf ? readLabNetConf(o.netConf, o) : null;
  if (nc) o = { ...o, network: nc.network, backend: nc.backend, ipFamily: nc.ipFamily, netConf: undefined };
  validateUpOptions(o);
  if (Deno.uid() !== 0) {
    throw new FlanctlError("flanctl lab needs root (network namespaces); run it with sudo", 1);
  }
  if (readState(o.name)) throw new LabExistsError(o.name);
  if (o.wireguardWay && o.wireguardWay !== "auto" && o.backend !== "wireguard") {
    throw new UsageError(
      `--wireguard-way ${o.wireguardWay}: only for --backend wireguard (this lab: ${o.backend})`,
    );
  }
  if (o.backend === "wireguard") labWireguardGo(); // its daemons need it: said before anything is made
  // The host's neighbour tables are shared by every namespace: refuse up front, before making anything.
  const fits = checkHostFits(
    `lab ${o.name}: ${o.nodes} nodes with ${o.podsPerNode} pod${o.podsPerNode === 1 ? "" : "s"} each`,
    { nodes: o.nodes, podsPerNode: o.podsPerNode, backend: o.backend, etcd: o.store === "etcd" },
    labFamilies(o.ipFamily),
    !!o.tuneHost,
  );
  if (o.store === "etcd" && !pathExists(ETCD_BIN)) {
    throw new FlanctlError(
      `--store etcd needs ${ETCD_BIN} (Debian package etcd-server: apt-get install etcd-server, or ./install.sh --dev)`,
      1,
    );
  }
  const ua = underlayAddrs(o.name);
  const dir = labDir(o.name);
  const s: LabState = {
    version: 1,
    name: o.name,
    dir,
    backend: o.backend,
    store: o.store,
    network: o.network,
    ...(o.ipFamily && o.ipFamily !== "ipv4" ? { ipFamily: o.ipFamily } : {}),
    ...(o.runtime === "containerd" ? { runtime: "containerd" as const } : {}),
    createdAt: new Date().toISOString(),
    underlay: { netns: underlayNetns(o.name), bridge: "br0", cidr: ua.cidr, gateway: ua.gateway },
    storeFlags: [],
    healthzPort: LAB_HEALTHZ_PORT,
    netns: [],
    nodes: [],
    pods: [],
    procs: [],
  };
  s.storeFlags = o.store === "etcd" ? ["--etcd-endpoints", etcdEndpoint(s)] : ["--store-dir", `${dir}/store`];
  if (o.leaseTtl !== undefined) s.storeFlags.push("--lease-ttl", String(o.leaseTtl));
  if (o.daemonArgs?.length) s.daemonArgs = [...o.daemonArgs];
  if (o.wireguardWay === "kernel" || o.wireguardWay === "userspace") s.wireguardWay = o.wireguardWay;
  if (nc) s.netConf = nc.text;
  // Creating the lab directory (not recursively) is the lock: of two `up`s with one name, one fails here.
  // The last `lab down` of another lab may remove the (empty) root between the two mkdirs: then again.
  for (;;) {
    Deno.mkdirSync(labRoot(), { recursive: true });
    try {
      Deno.mkdirSync(dir);
      break;
    } catch (e) {
      if (e instanceof Deno.errors.AlreadyExists) throw new LabExistsError(o.name);
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
  made.value = true;
  saveState(s);
  if (o.tuneHost && fits.some((f) => !f.fits || f.pastThresh2)) {
    for (const l of applyTuning(s, tuningFor(fits))) progress(l);
  } else fitNotes(fits).forEach(progress);
  ensureMountPoints();
  writeCniBin(s);
  // The file store is /var/lib/flanctl on every node; `state` in it is the mount point of each node's own
  // state directory (the daemon's default --state-dir).
  if (o.store === "file") Deno.mkdirSync(`${dir}/store/state`, { recursive: true });

  const u6 = hasV6(s) ? ` and ${underlayAddrs6(o.name).cidr}` : "";
  progress(
    `lab ${o.name}: underlay ${ua.cidr}${u6} (bridge ${s.underlay.bridge} in netns ${s.underlay.netns})`,
  );
  await buildUnderlay(s);
  signal?.throwIfAborted();
  if (o.store === "etcd") {
    progress(`starting etcd on ${etcdEndpoint(s)} (data in ${dir}/etcd)`);
    await startEtcd(s, signal);
  }
  // Node namespaces are independent: a few at a time (each is ~10 short `ip` commands).
  await pool(Array.from({ length: o.nodes }, (_, i) => i + 1), BUILD_PARALLEL, async (i) => {
    signal?.throwIfAborted();
    const n = await buildNode(s, i);
    progress(`${n.name}: netns ${n.netns}, public IP ${publicIPs(n)}`);
  });
  sortByIndex(s);
  saveState(s);
  progress(`network config: ${labNetConf(s)} -> ${o.store} store`);
  await writeNetConf(s);
  signal?.throwIfAborted();
  await startDaemons(s, s.nodes, progress);
  await readyThenPods(s, s.nodes, o.podsPerNode, progress, signal);
  return s;
}

/**
 * Waits for each node's daemon (subnet.env written, /readyz 200) and attaches its `count` pods as soon as
 * it is ready, so the pods of the first nodes attach while the last daemons still start. Every daemon is
 * waited for, also without pods. Pods of different nodes attach in parallel (a few at a time: each CNI ADD
 * is a process); the pods of one node one after another (they share its bridge and IPAM).
 */
async function readyThenPods(
  s: LabState,
  nodes: NodeState[],
  count: number,
  progress: Progress,
  signal?: AbortSignal,
) {
  const ready = nodes.map((n) =>
    waitDaemonReady(s, n, { signal }).then(() => progress(`${n.name}: daemon ready, ${subnetLine(n)}`))
  );
  // A daemon that fails fails the whole wait at once (not when its turn in the pool comes).
  const all = Promise.all(ready);
  all.catch(() => {});
  await pool(nodes.map((n, i) => [n, ready[i]] as const), BUILD_PARALLEL, async ([n, isReady]) => {
    await Promise.race([isReady, all]);
    for (let j = 1; j <= count; j++) {
      signal?.throwIfAborted();
      const pod = await buildPod(s, n, j);
      progress(`${pod.name}: netns ${pod.netns}, IP ${[pod.ip, pod.ipv6].filter(Boolean).join(" ")}`);
    }
  });
  sortByIndex(s);
  saveState(s);
  if (count > 0 && hasV6(s)) await waitBridgesSettled(s);
}

/** Nodes, then pods, in index order (they are made a few at a time). */
function sortByIndex(s: LabState): void {
  const num = (x: string) => x.match(/\d+/g)!.map(Number);
  const cmp = (a: string, b: string) => {
    const [x, y] = [num(a), num(b)];
    return x[0] - y[0] || (x[1] ?? 0) - (y[1] ?? 0);
  };
  s.nodes.sort((a, b) => cmp(a.name, b.name));
  s.pods.sort((a, b) => cmp(a.name, b.name));
}

function subnetLine(n: NodeState): string {
  try {
    const t = Deno.readTextFileSync(`${n.dir}/run/flannel/subnet.env`);
    return t.trim().split("\n")
      .filter((l) => /^FLANNEL_(IPV6_)?SUBNET=|^FLANNEL_MTU=/.test(l))
      .join(" ");
  } catch {
    return "no subnet.env";
  }
}

/** A node's public addresses, IPv4 then IPv6 (when the lab has it). */
function publicIPs(n: NodeState): string {
  return [n.publicIP, n.publicIPv6].filter(Boolean).join(" ");
}

/** Adds one node (with `pods` pods) to a running lab; returns it. */
export async function labAddNode(
  s: LabState,
  pods: number,
  progress: Progress,
  signal?: AbortSignal,
): Promise<NodeState> {
  const index = Math.max(0, ...s.nodes.map((n) => Number(n.name.slice(4)))) + 1;
  const perNode = Math.max(pods, Math.ceil(s.pods.length / Math.max(1, s.nodes.length)));
  const load = (nodes: number) => ({
    nodes,
    podsPerNode: perNode,
    backend: s.backend,
    etcd: s.store === "etcd",
  });
  checkHostFits(
    `lab ${s.name} with ${s.nodes.length + 1} nodes`,
    load(s.nodes.length + 1),
    labFamilies(s.ipFamily),
    false,
    load(s.nodes.length),
  );
  const n = await buildNode(s, index);
  progress(`${n.name}: netns ${n.netns}, public IP ${publicIPs(n)}`);
  await startDaemons(s, [n], progress);
  await readyThenPods(s, [n], pods, progress, signal);
  return n;
}
