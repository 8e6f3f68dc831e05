/**
 * `flanctl lab up --kube`: a real Kubernetes cluster in the lab, with flanctl as its network exactly as a
 * user deploys it. The underlay namespace holds the control plane: etcd (Debian's) on its loopback,
 * kube-apiserver with client certificates, service-account keys and `--authorization-mode=Node,RBAC`,
 * kube-controller-manager with `--allocate-node-cidrs` (podCIDRs come from Kubernetes) and kube-scheduler.
 * Each node namespace runs a containerd and a kubelet (built by `install.sh --dev`, tools/peers/build.sh) in
 * a mount namespace of their own where the node's directories are bound over /opt/cni/bin, /etc/cni/net.d,
 * /run/flannel, /run/netns and /var/log/pods, and the cgroup v1 hierarchies are mounted again (`ip netns
 * exec` hides them); the image (deploy/build-image.sh's archive) and a busybox sandbox image are imported
 * into each containerd, with the peer images (kube-proxy, CoreDNS: `deploy/build-image.sh --peer`); kube-proxy
 * and CoreDNS are deployed as kubeadm deploys them (lib/lab/kube_addons.ts): kube-proxy first, on its own
 * kubeconfig against the control-plane endpoint, so that flanctl's DaemonSet then reaches the API through the
 * Service VIP 10.96.0.1 as on a kubeadm node; deploy/kube-flanctl.yml is applied with kubectl as it is; CoreDNS
 * last (it needs the pod network), kubelet's clusterDNS pointing at its `kube-dns` Service.
 *
 * Measured facts this follows (docs/lab.md, `lab up --kube`): restrict_oom_score_adj, cgroup v1 opt-in
 * `failCgroupV1: false`, --use-service-account-credentials for the CIDR patch.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { buildSandboxImage, SANDBOX_IMAGE } from "./containerd.ts";
import { CLUSTER_DOMAIN, coreDnsObjects, DNS_VIP, kubeProxyObjects } from "./kube_addons.ts";
import type { ProxyMode } from "./kube_addons.ts";
import { ensureMountPoints } from "./exec.ts";
import { labDir, underlayAddrs, underlayNetns, validateLabName } from "./paths.ts";
import { mustRun, runCmd, shq, sleep, spawnDetached } from "./proc.ts";
import type { CmdResult } from "./proc.ts";
import type { PodPort } from "./types.ts";
import { kubeletRunning, kubeNetConfPath, writeKubeRecord } from "./kube_status.ts";
import type { KubeLabRecord } from "./kube_status.ts";
import {
  clusterCidrs,
  dualStackManifest,
  manifestNetConf,
  nodeMaskFlags,
  SERVICE_VIP,
  SERVICE_VIP6,
  serviceCidrs,
} from "./kube_family.ts";
import type { KubeIpFamily } from "./kube_family.ts";
import { underlayAddrs6 } from "./family.ts";

/** The Kubernetes release install.sh --dev builds (tools/peers/build.sh). */
export const K8S_VERSION = "v1.37.2";
/** The CoreDNS release install.sh --dev builds (tools/peers/build.sh's COREDNS_VERSION). */
export const COREDNS_VERSION = "v1.15.0";
/** The peer programs that go into images (deploy/build-image.sh --peer) or drive the e2e suite, by cache dir. */
export const PEER_IMAGE_PROGRAMS: Record<string, string> = {
  "kube-proxy": `kube-proxy-${K8S_VERSION}`,
  "agnhost": `agnhost-${K8S_VERSION}`,
  "e2e.test": `e2e-${K8S_VERSION}`,
  "coredns": `coredns-${COREDNS_VERSION}`,
};
/** The Kubernetes programs the lab runs. */
export const KUBE_PROGRAMS = [
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kubelet",
  "kubectl",
];
export { SERVICE_CIDR, SERVICE_VIP } from "./kube_family.ts";
/** Extra host mount points a kube node binds its own directories over. */
export const KUBE_NODE_PATHS = [
  "/opt/cni/bin",
  "/etc/cni/net.d",
  "/var/lib/cni",
  "/run/flannel",
  "/var/log/pods",
  "/var/log/containers",
];

/** A missing program or a step of the cluster that failed. */
export class KubeLabError extends FlanctlError {
  constructor(message: string) {
    super(message, 1);
  }
}

/** What `lab up --kube` builds. */
export interface KubeUpOptions {
  name: string;
  nodes: number;
  /** deploy/build-image.sh's archive (tagged as the manifest's image line). */
  image: string;
  /** The manifest to apply (deploy/kube-flanctl.yml). */
  manifest: string;
  /** Pod network (the manifest's net-conf Network; kube-controller-manager's --cluster-cidr). */
  clusterCidr?: string;
  /** The kube-proxy and CoreDNS image archives (`deploy/build-image.sh --peer kube-proxy|coredns`). */
  proxyImage: string;
  dnsImage: string;
  /** kube-proxy's mode (default iptables, as kubeadm). */
  proxyMode?: ProxyMode;
  /** More image archives imported into every node (e.g. the e2e suite's agnhost). */
  extraImages?: string[];
  /** ipv4 (default) or dual: both families for pods, Services and nodes (lib/lab/kube_family.ts). */
  ipFamily?: KubeIpFamily;
  /** `--network-policy`: the manifest's FLANNELD_NETWORK_POLICY switch turned on (docs/networkpolicy.md). */
  networkPolicy?: boolean;
}

/**
 * The manifest with its commented `FLANNELD_NETWORK_POLICY` env entry switched on. Throws
 * {@link KubeLabError} when the manifest has no such commented entry.
 */
export function manifestWithNetworkPolicy(text: string): string {
  const re = /^(\s*)# - name: FLANNELD_NETWORK_POLICY\n\1# {3}value: "true"$/m;
  if (!re.test(text)) {
    throw new KubeLabError(
      "--network-policy: the manifest has no commented FLANNELD_NETWORK_POLICY entry (as deploy/kube-flanctl.yml)",
    );
  }
  return text.replace(re, '$1- name: FLANNELD_NETWORK_POLICY\n$1  value: "true"');
}

function isExecutable(p: string): boolean {
  try {
    const st = Deno.statSync(p);
    return st.isFile && ((st.mode ?? 0) & 0o111) !== 0;
  } catch {
    return false;
  }
}

/**
 * Where program `prog` is: FLANCTL_PEER_<PROG> (upper case, dashes as underscores), the dev cache
 * (FLANCTL_DEV_CACHE, default /var/cache/flanctl-dev) of {@link K8S_VERSION} that tools/peers/build.sh
 * fills, then PATH; null when none.
 */
export function findProgram(prog: string, env = Deno.env.toObject()): string | null {
  const override = env[`FLANCTL_PEER_${prog.toUpperCase().replaceAll("-", "_")}`];
  if (override) return isExecutable(override) ? override : null;
  const cache = env.FLANCTL_DEV_CACHE ?? "/var/cache/flanctl-dev";
  if (KUBE_PROGRAMS.includes(prog)) {
    // tools/peers/build.sh: kube-scheduler in a cache directory of its own, the others together.
    for (const dir of [`kubernetes-${K8S_VERSION}`, `kube-scheduler-${K8S_VERSION}`]) {
      if (isExecutable(`${cache}/${dir}/bin/${prog}`)) return `${cache}/${dir}/bin/${prog}`;
    }
  }
  const own = PEER_IMAGE_PROGRAMS[prog];
  if (own && isExecutable(`${cache}/${own}/bin/${prog}`)) return `${cache}/${own}/bin/${prog}`;
  for (const d of (env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin").split(":")) {
    if (d && isExecutable(`${d}/${prog}`)) return `${d}/${prog}`;
  }
  return null;
}

/** Every program of the kube lab, or a {@link KubeLabError} naming the missing ones and the fix. */
export function kubePrograms(): Record<string, string> {
  const need = [...KUBE_PROGRAMS, "etcd", "containerd", "ctr", "openssl", "busybox", "tar"];
  const found: Record<string, string> = {};
  const missing: string[] = [];
  for (const p of need) {
    const f = findProgram(p);
    if (f) found[p] = f;
    else missing.push(p);
  }
  if (missing.length) {
    throw new KubeLabError(
      `lab up --kube: ${missing.join(", ")} not found; ./install.sh --dev installs them (Kubernetes ` +
        `${K8S_VERSION} into /var/cache/flanctl-dev; FLANCTL_PEER_<NAME>=/path points at another build)`,
    );
  }
  return found;
}

/** The lab's Kubernetes paths. */
export function kubePaths(name: string) {
  const dir = labDir(name);
  return {
    dir,
    pki: `${dir}/pki`,
    admin: `${dir}/admin.kubeconfig`,
    sandboxTar: `${dir}/sandbox-image.tar`,
    node: (i: number) => `${dir}/node${i}`,
  };
}

/** openssl commands making the CA and every certificate (server SANs for the API server and kubelets). */
export function pkiScript(pki: string, apiIP: string, nodeIPs: string[], nodeIPs6: string[] = []): string {
  const lines = [
    "set -e",
    `cd ${shq(pki)}`,
    "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3 -subj /CN=flanctl-lab-ca 2>/dev/null",
    "cert() {",
    '  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null',
    '  if [ -n "$3" ]; then printf "subjectAltName=%s\\nextendedKeyUsage=serverAuth,clientAuth\\n" "$3" >"$1.ext"',
    '  else printf "extendedKeyUsage=clientAuth\\n" >"$1.ext"; fi',
    '  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3 ' +
    '-extfile "$1.ext" 2>/dev/null',
    "}",
    `cert apiserver /CN=kube-apiserver "IP:${apiIP},IP:127.0.0.1,IP:${SERVICE_VIP},` +
    `${nodeIPs6.length ? `IP:${SERVICE_VIP6},` : ""}DNS:kubernetes,DNS:kubernetes.default,` +
    `DNS:kubernetes.default.svc"`,
    'cert admin "/O=system:masters/CN=flanctl-lab-admin" ""',
    'cert kcm /CN=system:kube-controller-manager ""',
    'cert scheduler /CN=system:kube-scheduler ""',
    ...nodeIPs.map((ip, i) =>
      `cert node${i + 1} "/O=system:nodes/CN=system:node:node${i + 1}" "IP:${ip}${
        nodeIPs6[i] ? `,IP:${nodeIPs6[i]}` : ""
      }"`
    ),
    "openssl genrsa -out sa.key 2048 2>/dev/null",
    "openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null",
    "rm -f ./*.csr ./*.ext",
  ];
  return lines.join("\n") + "\n";
}

/** A kubeconfig for `user` (its cert/key in `pki`) against `server`. */
export function kubeconfig(server: string, pki: string, user: string): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: lab",
    `  cluster: {certificate-authority: ${JSON.stringify(`${pki}/ca.crt`)}, server: ${
      JSON.stringify(server)
    }}`,
    "users:",
    `- name: ${user}`,
    `  user: {client-certificate: ${JSON.stringify(`${pki}/${user}.crt`)}, client-key: ${
      JSON.stringify(`${pki}/${user}.key`)
    }}`,
    "contexts:",
    `- name: lab`,
    `  context: {cluster: lab, user: ${user}}`,
    "current-context: lab",
  ].join("\n") + "\n";
}

/** containerd's config for a node: its own root/state/socket, the CRI plugin on the default CNI paths. */
export function containerdConfig(nodeDir: string): string {
  const q = JSON.stringify;
  return [
    "version = 2",
    `root = ${q(`${nodeDir}/containerd/root`)}`,
    `state = ${q(`${nodeDir}/containerd/state`)}`,
    "[grpc]",
    `  address = ${q(`${nodeDir}/containerd/sock`)}`,
    "[ttrpc]",
    `  address = ${q(`${nodeDir}/containerd/sock.ttrpc`)}`,
    '[plugins."io.containerd.grpc.v1.cri"]',
    "  restrict_oom_score_adj = true",
    `  sandbox_image = ${q(SANDBOX_IMAGE)}`,
    '  [plugins."io.containerd.grpc.v1.cri".containerd]',
    '    snapshotter = "overlayfs"',
    '  [plugins."io.containerd.grpc.v1.cri".cni]',
    '    bin_dir = "/opt/cni/bin"',
    '    conf_dir = "/etc/cni/net.d"',
  ].join("\n") + "\n";
}

/** The KubeletConfiguration of a node (cgroup v1 opt-in, cgroupfs, no QoS hierarchy, x509 authn). */
export function kubeletConfig(nodeDir: string, ip: string, pki: string, node: string): string {
  const q = JSON.stringify;
  return [
    "apiVersion: kubelet.config.k8s.io/v1beta1",
    "kind: KubeletConfiguration",
    "authentication:",
    "  anonymous: {enabled: false}",
    "  webhook: {enabled: false}",
    `  x509: {clientCAFile: ${q(`${pki}/ca.crt`)}}`,
    "authorization: {mode: AlwaysAllow}",
    "cgroupDriver: cgroupfs",
    "failCgroupV1: false",
    "failSwapOn: false",
    "cgroupsPerQOS: false",
    "enforceNodeAllocatable: []",
    `containerRuntimeEndpoint: ${q(`unix://${nodeDir}/containerd/sock`)}`,
    `address: ${q(ip)}`,
    "readOnlyPort: 0",
    "healthzPort: 0",
    "protectKernelDefaults: false",
    "localStorageCapacityIsolation: false",
    "evictionHard: {}",
    "imageGCHighThresholdPercent: 100",
    "resolvConf: /etc/resolv.conf",
    `clusterDNS: [${q(DNS_VIP)}]`,
    `clusterDomain: ${q(CLUSTER_DOMAIN)}`,
    `tlsCertFile: ${q(`${pki}/${node}.crt`)}`,
    `tlsPrivateKeyFile: ${q(`${pki}/${node}.key`)}`,
  ].join("\n") + "\n";
}

/**
 * The node's start script, run by `ip netns exec <node>` (a mount namespace of its own): bind the node's
 * directories over the host paths, mount the cgroup v1 hierarchies again, start containerd, import the
 * images, exec kubelet. A bind that fails stops it before anything runs (no pod may write the host's paths).
 */
export function nodeScript(
  o: {
    nodeDir: string;
    /** kubelet's --node-ip: the node's IPv4, or "IPv4,IPv6" in dual stack. */
    ip: string;
    node: string;
    pki: string;
    images: string[];
    progs: Record<string, string>;
  },
): string {
  const d = o.nodeDir;
  const binds: [string, string][] = [
    [`${d}/cni-bin`, "/opt/cni/bin"],
    [`${d}/cni-conf`, "/etc/cni/net.d"],
    [`${d}/var-lib-cni`, "/var/lib/cni"],
    [`${d}/run-flannel`, "/run/flannel"],
    [`${d}/log-pods`, "/var/log/pods"],
    [`${d}/log-containers`, "/var/log/containers"],
    [`${d}/netns`, "/run/netns"],
  ];
  const sock = `${d}/containerd/sock`;
  return [
    "set -e",
    ...binds.map(([src, dst]) => `mount --bind ${shq(src)} ${shq(dst)}`),
    ...binds.map(([src, dst]) =>
      `[ "$(stat -c %i ${shq(dst)})" = "$(stat -c %i ${
        shq(src)
      })" ] || { echo "bind ${dst} failed" >&2; exit 1; }`
    ),
    "mount -t tmpfs cgroup_root /sys/fs/cgroup",
    "grep '^cgroup ' /proc/1/mounts | while read -r _ dir _ opts _; do",
    '  name=${dir##*/}; mkdir -p "/sys/fs/cgroup/$name"',
    "  o=$(echo \"$opts\" | tr , '\\n' | grep -vE '^(rw|ro|nosuid|nodev|noexec|relatime)$' | paste -sd, -)",
    '  mount -t cgroup -o "$o" cgroup "/sys/fs/cgroup/$name"',
    "done",
    `${shq(o.progs.containerd)} --config ${shq(`${d}/containerd/config.toml`)} >>${
      shq(`${d}/containerd.log`)
    } 2>&1 &`,
    `for i in $(seq 100); do ${shq(o.progs.ctr)} -a ${
      shq(sock)
    } version >/dev/null 2>&1 && break; sleep 0.1; done`,
    ...o.images.map((img) =>
      `${shq(o.progs.ctr)} -a ${shq(sock)} -n k8s.io images import ${shq(img)} >/dev/null`
    ),
    `exec ${shq(o.progs.kubelet)} --config=${shq(`${d}/kubelet.yaml`)} --kubeconfig=${
      shq(`${d}/kubeconfig`)
    } ` +
    `--root-dir=${shq(`${d}/kubelet`)} --hostname-override=${o.node} --node-ip=${o.ip} --v=1`,
  ].join("\n") + "\n";
}

/** kubectl with the lab's admin kubeconfig, run in the underlay namespace (where the API server listens). */
export function kubectlCmd(
  name: string,
  args: string[],
  kubectl = findProgram("kubectl") ?? "kubectl",
): string[] {
  return [
    "ip",
    "netns",
    "exec",
    underlayNetns(name),
    kubectl,
    "--kubeconfig",
    kubePaths(name).admin,
    ...args,
  ];
}

/** Runs kubectl against lab `name` (admin credentials, in the underlay namespace), `stdin` as its input. */
export function runKubectl(name: string, args: string[], stdin?: string): Promise<CmdResult> {
  return runCmd(kubectlCmd(name, args), { stdin });
}

async function waitFor(what: string, ms: number, fn: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await sleep(500);
  }
  throw new KubeLabError(`lab up --kube: ${what} not within ${ms / 1000} s`);
}

/** Builds the cluster; `say` gets one line per step. The caller tears down on failure (lab down). */
export async function kubeUp(o: KubeUpOptions, say: (l: string) => void): Promise<void> {
  validateLabName(o.name);
  const progs = kubePrograms();
  for (const f of [o.image, o.manifest, o.proxyImage, o.dnsImage, ...(o.extraImages ?? [])]) {
    try {
      Deno.statSync(f);
    } catch {
      throw new KubeLabError(
        `${f}: not found (deploy/build-image.sh builds dist/flanctl-image.tar; deploy/build-image.sh --peer ` +
          `kube-proxy|coredns the peer images, dist/kube-proxy-image.tar and dist/coredns-image.tar)`,
      );
    }
  }
  const images = [o.image, o.proxyImage, o.dnsImage, ...(o.extraImages ?? [])];
  const proxyRef = await archiveImageName(o.proxyImage, progs.tar);
  const dnsRef = await archiveImageName(o.dnsImage, progs.tar);
  const t0 = Date.now();
  const p = kubePaths(o.name);
  const ul = underlayAddrs(o.name);
  const api = ul.gateway;
  const un = underlayNetns(o.name);
  const nodeIPs = Array.from({ length: o.nodes }, (_, i) => ul.nodeIP(i + 1));
  const family = o.ipFamily ?? "ipv4";
  const ul6 = family === "dual" ? underlayAddrs6(o.name) : null;
  const nodeIPs6 = ul6 ? nodeIPs.map((_, i) => ul6.nodeIP(i + 1)) : [];
  await Deno.mkdir(p.pki, { recursive: true });
  const clusterCidr = clusterCidrs(family, o.clusterCidr ?? "10.244.0.0/16").join(",");
  const serviceCidr = serviceCidrs(family).join(",");
  const manifest = await Deno.readTextFile(o.manifest);
  const familyManifest = family === "dual" ? dualStackManifest(manifest) : manifest;
  const applyManifest = o.networkPolicy ? manifestWithNetworkPolicy(familyManifest) : familyManifest;
  const mode = o.proxyMode ?? "iptables";
  const record: KubeLabRecord = {
    name: o.name,
    nodes: o.nodes,
    ipFamily: family,
    network: clusterCidr,
    backend: manifestBackend(manifest),
    proxyMode: mode,
    createdAt: new Date().toISOString(),
    kubeletPids: Array(o.nodes).fill(0),
  };
  writeKubeRecord(record);
  ensureMountPoints(KUBE_NODE_PATHS);

  say(`underlay ${un}: bridge br0 ${api}/24, control plane`);
  await mustRun(["ip", "netns", "add", un]);
  for (
    const c of [
      ["link", "set", "lo", "up"],
      ["link", "add", "br0", "type", "bridge"],
      ["addr", "add", `${api}/24`, "dev", "br0"],
      ["link", "set", "br0", "up"],
    ]
  ) await mustRun(["ip", "-n", un, ...c]);
  if (ul6) {
    // The IPv6 underlay of the other labs' dual family; the underlay routes IPv6 pod networks (below).
    await mustRun(["ip", "-n", un, "addr", "add", `${ul6.gateway}/64`, "dev", "br0", "nodad"]);
    await mustRun(["ip", "netns", "exec", un, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
  }
  await mustRun(["sh", "-c", pkiScript(p.pki, api, nodeIPs, nodeIPs6)]);
  const server = `https://${api}:6443`;
  for (const u of ["admin", "kcm", "scheduler"]) {
    await Deno.writeTextFile(`${p.dir}/${u}.kubeconfig`, kubeconfig(server, p.pki, u));
  }
  const inUl = (cmd: string[]) => ["ip", "netns", "exec", un, ...cmd];
  await spawnDetached(
    inUl([
      progs.etcd,
      "--data-dir",
      `${p.dir}/etcd`,
      "--listen-client-urls",
      "http://127.0.0.1:2379",
      "--advertise-client-urls",
      "http://127.0.0.1:2379",
      "--listen-peer-urls",
      "http://127.0.0.1:2380",
    ]),
    `${p.dir}/etcd.log`,
  );
  await spawnDetached(
    inUl([
      progs["kube-apiserver"],
      "--etcd-servers=http://127.0.0.1:2379",
      `--bind-address=${api}`,
      `--advertise-address=${api}`,
      "--secure-port=6443",
      `--client-ca-file=${p.pki}/ca.crt`,
      `--tls-cert-file=${p.pki}/apiserver.crt`,
      `--tls-private-key-file=${p.pki}/apiserver.key`,
      "--service-account-issuer=https://kubernetes.default.svc",
      `--service-account-key-file=${p.pki}/sa.pub`,
      `--service-account-signing-key-file=${p.pki}/sa.key`,
      "--authorization-mode=Node,RBAC",
      "--enable-admission-plugins=NodeRestriction",
      "--allow-privileged=true",
      `--service-cluster-ip-range=${serviceCidr}`,
      "--kubelet-preferred-address-types=InternalIP",
      `--kubelet-client-certificate=${p.pki}/admin.crt`,
      `--kubelet-client-key=${p.pki}/admin.key`,
    ]),
    `${p.dir}/kube-apiserver.log`,
  );
  const kubectl = (args: string[]) => runCmd(kubectlCmd(o.name, args, progs.kubectl));
  await waitFor(
    "the API server ready",
    60_000,
    async () => (await kubectl(["get", "--raw", "/readyz"])).code === 0,
  );
  await spawnDetached(
    inUl([
      progs["kube-controller-manager"],
      `--kubeconfig=${p.dir}/kcm.kubeconfig`,
      "--controllers=*",
      "--allocate-node-cidrs=true",
      `--cluster-cidr=${clusterCidr}`,
      ...nodeMaskFlags(family),
      "--leader-elect=false",
      "--secure-port=0",
      "--use-service-account-credentials=true",
      `--service-account-private-key-file=${p.pki}/sa.key`,
      `--root-ca-file=${p.pki}/ca.crt`,
      `--service-cluster-ip-range=${serviceCidr}`,
    ]),
    `${p.dir}/kube-controller-manager.log`,
  );
  await spawnDetached(
    inUl([
      progs["kube-scheduler"],
      `--kubeconfig=${p.dir}/scheduler.kubeconfig`,
      "--leader-elect=false",
      "--secure-port=0",
    ]),
    `${p.dir}/kube-scheduler.log`,
  );
  say(`control plane up (${((Date.now() - t0) / 1000).toFixed(1)} s): ${server}`);

  await buildSandboxImage(p.sandboxTar, progs.busybox);
  for (let i = 1; i <= o.nodes; i++) {
    const node = `node${i}`, ns = `${o.name}-${node}`, d = p.node(i), ip = nodeIPs[i - 1];
    for (
      const sub of [
        "cni-bin",
        "cni-conf",
        "var-lib-cni",
        "run-flannel",
        "log-pods",
        "log-containers",
        "netns",
        "containerd",
        "kubelet",
      ]
    ) {
      await Deno.mkdir(`${d}/${sub}`, { recursive: true });
    }
    await mustRun(["ip", "netns", "add", ns]);
    await mustRun(["ip", "-n", ns, "link", "set", "lo", "up"]);
    await mustRun([
      "ip",
      "link",
      "add",
      `u-${node}`,
      "netns",
      un,
      "type",
      "veth",
      "peer",
      "name",
      "eth0",
      "netns",
      ns,
    ]);
    await mustRun(["ip", "-n", un, "link", "set", `u-${node}`, "master", "br0", "up"]);
    await mustRun(["ip", "-n", ns, "addr", "add", `${ip}/24`, "dev", "eth0"]);
    await mustRun(["ip", "-n", ns, "link", "set", "eth0", "up"]);
    await mustRun(["ip", "-n", ns, "route", "add", "default", "via", api]);
    if (ul6) {
      // As a dual-stack kubeadm node: its IPv6 address and default route, IPv6 forwarding on.
      await mustRun(["ip", "-n", ns, "addr", "add", `${nodeIPs6[i - 1]}/64`, "dev", "eth0", "nodad"]);
      await mustRun(["ip", "-n", ns, "-6", "route", "add", "default", "via", ul6.gateway, "dev", "eth0"]);
      await mustRun(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
    }
    await Deno.writeTextFile(`${d}/containerd/config.toml`, containerdConfig(d));
    await Deno.writeTextFile(`${d}/kubelet.yaml`, kubeletConfig(d, ip, p.pki, node));
    await Deno.writeTextFile(`${d}/kubeconfig`, kubeconfig(server, p.pki, node));
    await Deno.writeTextFile(
      `${d}/start.sh`,
      nodeScript({
        nodeDir: d,
        ip: [ip, ...(ul6 ? [nodeIPs6[i - 1]] : [])].join(","),
        node,
        pki: p.pki,
        images: [p.sandboxTar, ...images],
        progs,
      }),
    );
    record.kubeletPids[i - 1] = await spawnDetached(
      ["ip", "netns", "exec", ns, "sh", `${d}/start.sh`],
      `${d}/kubelet.log`,
    );
    writeKubeRecord(record);
    say(`${node}: ${ns} ${ip}, containerd + kubelet ${K8S_VERSION}`);
  }
  await waitFor("every node registered", 120_000, async () => {
    const r = await kubectl(["get", "nodes", "-o", "name"]);
    return r.code === 0 && r.stdout.trim().split("\n").filter(Boolean).length === o.nodes;
  });
  const apply = async (what: string, obj: Record<string, unknown>) => {
    const r = await runCmd(kubectlCmd(o.name, ["apply", "-f", "-"], progs.kubectl), {
      stdin: JSON.stringify(obj),
    });
    if (r.code !== 0) throw new KubeLabError(`kubectl apply (${what}): ${r.stderr.trim().slice(0, 2000)}`);
  };
  // kube-proxy first: it reaches the API on the control-plane endpoint and programs the VIPs the others use.
  await apply("kube-proxy", kubeProxyObjects({ server, clusterCidr, mode, image: proxyRef }));
  say(`kube-proxy (${mode} mode) as a DaemonSet: ${proxyRef}`);
  const applied = await runCmd(kubectlCmd(o.name, ["apply", "-f", "-"], progs.kubectl), {
    stdin: applyManifest,
  });
  if (applied.code !== 0) throw new KubeLabError(`kubectl apply -f ${o.manifest}: ${applied.stderr.trim()}`);
  const netConf = manifestNetConf(applyManifest);
  if (netConf) await Deno.writeTextFile(kubeNetConfPath(o.name), netConf);
  say(
    `applied ${o.manifest}${family === "dual" ? " (net-conf: EnableIPv6, IPv6Network)" : ""}${
      o.networkPolicy ? " (NetworkPolicy enforced)" : ""
    }`,
  );
  await waitFor("every node Ready (flanctl's DaemonSet running)", 240_000, async () => {
    const r = await kubectl([
      "get",
      "nodes",
      "-o",
      'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
    ]);
    const st = r.stdout.trim().split("\n").filter(Boolean);
    return r.code === 0 && st.length === o.nodes && st.every((s) => s === "True");
  });
  await waitFor("flanctl's DaemonSet ready on every node", 240_000, async () => {
    const r = await kubectl([
      "-n",
      "kube-flannel",
      "get",
      "ds",
      "kube-flannel-ds",
      "-o",
      "jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}",
    ]);
    return r.code === 0 && r.stdout.trim() === `${o.nodes}/${o.nodes}`;
  });
  // The control plane as a member of the pod network (a kubeadm control-plane node runs flannel too): the
  // underlay routes each node's podCIDR to that node, so the API server's proxy to a pod (`pods/proxy`, which
  // the e2e suite uses) and a client in the underlay (e2e.test) reach pods.
  const cidrs = await kubectl([
    "get",
    "nodes",
    "-o",
    'jsonpath={range .items[*]}{.metadata.name} {.spec.podCIDRs[*]}{"\\n"}{end}',
  ]);
  for (const [node, ...podCidrs] of cidrs.stdout.split("\n").map((l) => l.trim().split(" "))) {
    const i = Number(/^node(\d+)$/.exec(node ?? "")?.[1]);
    if (!i || i > o.nodes) continue;
    for (const cidr of podCidrs) {
      if (/^[0-9.]+\/[0-9]{1,2}$/.test(cidr)) {
        await mustRun(["ip", "-n", un, "route", "replace", cidr, "via", nodeIPs[i - 1]]);
      } else if (ul6 && /^[0-9a-f:]+\/[0-9]{1,3}$/.test(cidr)) {
        await mustRun(["ip", "-n", un, "-6", "route", "replace", cidr, "via", nodeIPs6[i - 1]]);
      }
    }
  }
  await waitFor("kube-proxy ready on every node", 120_000, async () => {
    const r = await kubectl([
      "-n",
      "kube-system",
      "get",
      "ds",
      "kube-proxy",
      "-o",
      "jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}",
    ]);
    return r.code === 0 && r.stdout.trim() === `${o.nodes}/${o.nodes}`;
  });
  say(
    `${o.nodes} nodes Ready, flanctl and kube-proxy on each, in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
  const replicas = Math.min(2, o.nodes);
  await apply("CoreDNS", coreDnsObjects({ image: dnsRef, replicas }));
  await waitFor("CoreDNS ready", 180_000, async () => {
    const r = await kubectl([
      "-n",
      "kube-system",
      "get",
      "deploy",
      "coredns",
      "-o",
      "jsonpath={.status.readyReplicas}",
    ]);
    return r.code === 0 && r.stdout.trim() === String(replicas);
  });
  say(
    `CoreDNS ${dnsRef} ready (${replicas} replicas), kube-dns ${DNS_VIP}, in ${
      ((Date.now() - t0) / 1000).toFixed(1)
    } s`,
  );
}

/** The backend type of a manifest's net-conf.json ("vxlan" when it names none). */
export function manifestBackend(manifest: string): string {
  return /"Backend"\s*:\s*\{[^}]*?"Type"\s*:\s*"([a-z0-9-]{1,20})"/.exec(manifest)?.[1] ?? "vxlan";
}

/** The image name an archive carries (its index's io.containerd.image.name, as `ctr images import` names it). */
export async function archiveImageName(archive: string, tar = "tar"): Promise<string> {
  const r = await runCmd([tar, "-xOf", archive, "index.json"]);
  if (r.code !== 0) throw new KubeLabError(`${archive}: no index.json (not an OCI archive?)`);
  return imageNameOfIndex(r.stdout, archive);
}

/** The one image name of an OCI index.json (bounded and validated: the archive is a file from outside). */
export function imageNameOfIndex(text: string, what: string): string {
  let name: unknown;
  try {
    name = JSON.parse(text.slice(0, 65536))?.manifests?.[0]?.annotations?.["io.containerd.image.name"];
  } catch {
    name = undefined;
  }
  if (typeof name !== "string" || !/^[a-z0-9][a-z0-9._\/:-]{0,200}$/.test(name)) {
    throw new KubeLabError(`${what}: its index.json names no image (io.containerd.image.name)`);
  }
  return name;
}

/** A pod `lab add-pod` made through the API of a --kube lab. */
export interface KubePod {
  name: string;
  node: string;
  ip: string;
}

/** The Pod object `lab add-pod` creates: pinned to `node`, the busybox image, httpd on a published port. */
export function labPodManifest(name: string, node: string, ports: PodPort[]): Record<string, unknown> {
  const tcp = ports.find((p) => p.protocol === "tcp");
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { "flanctl-lab": "add-pod" } },
    spec: {
      nodeName: node,
      terminationGracePeriodSeconds: 1,
      containers: [{
        name: "c",
        image: SANDBOX_IMAGE,
        imagePullPolicy: "Never",
        command: tcp
          ? ["/bin/busybox", "httpd", "-f", "-p", String(tcp.containerPort), "-h", "/"]
          : ["/bin/busybox", "sleep", "2147483647"],
        ports: ports.map((p) => ({
          containerPort: p.containerPort,
          hostPort: p.hostPort,
          protocol: p.protocol.toUpperCase(),
        })),
      }],
    },
  };
}

/** `lab add-pod` on a --kube lab: a Pod through the API on `node`; waits until it runs with an address. */
export async function kubeAddPod(
  name: string,
  node: string,
  ports: PodPort[],
  say: (l: string) => void,
): Promise<KubePod> {
  const kubectl = (args: string[], stdin?: string) => runCmd(kubectlCmd(name, args), { stdin });
  const nodes = await kubectl(["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"]);
  const known = nodes.stdout.trim().split(/\s+/).filter(Boolean);
  if (!known.includes(node)) {
    throw new KubeLabError(`lab '${name}' has no node '${node}' (known: ${known.join(", ") || "none"})`);
  }
  const rnd = crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 5);
  const pod = `${node}-pod-${rnd}`;
  const created = await kubectl(["create", "-f", "-"], JSON.stringify(labPodManifest(pod, node, ports)));
  if (created.code !== 0) throw new KubeLabError(`kubectl create pod ${pod}: ${created.stderr.trim()}`);
  let ip = "";
  await waitFor(`pod ${pod} running`, 120_000, async () => {
    const r = await kubectl(["get", "pod", pod, "-o", "jsonpath={.status.phase} {.status.podIP}"]);
    const [phase, addr] = r.stdout.trim().split(" ");
    ip = addr ?? "";
    return phase === "Running" && !!ip;
  });
  say(
    `${pod} on ${node}: ${ip}${
      ports.map((p) => `, hostPort ${p.hostPort}->${p.containerPort}/${p.protocol}`).join("")
    }`,
  );
  return { name: pod, node, ip };
}

/**
 * `lab exec nodeN -- CMD` on a --kube lab: CMD in the node's kubelet's namespaces (network and mount, entered
 * with nsenter by the recorded pid), so it sees the node's directories at the default paths as the kubelet,
 * containerd and flanctl's DaemonSet do (/opt/cni/bin, /etc/cni/net.d, /var/lib/cni, /run/flannel, and
 * containerd's sandbox namespaces under /run/netns), with the store flanctl's DaemonSet uses in the
 * environment (the API: kube subnet manager, the lab's admin kubeconfig, the node's name), so `flanctl doctor`
 * or `flanctl lease list` work there.
 */
export function kubeExecArgv(
  r: KubeLabRecord,
  target: string,
  cmd: string[],
  running: (r: KubeLabRecord, i: number) => boolean = kubeletRunning,
): { argv: string[]; env: Record<string, string> } {
  const i = Number(/^node([1-9][0-9]{0,2})$/.exec(target)?.[1]);
  if (!i || i > r.nodes) {
    const known = Array.from({ length: r.nodes }, (_, k) => `node${k + 1}`);
    throw new KubeLabError(
      `lab '${r.name}' has no node '${target}' (known: ${known.join(", ")}; a pod: flanctl lab kubectl ` +
        `--name ${r.name} -- exec POD -- CMD)`,
    );
  }
  if (!running(r, i)) throw new KubeLabError(`lab '${r.name}': the kubelet of ${target} is not running`);
  return {
    argv: ["nsenter", "-t", String(r.kubeletPids[i - 1]), "-m", "-n", "--", ...cmd],
    env: {
      FLANNELD_KUBE_SUBNET_MGR: "true",
      FLANNELD_KUBECONFIG_FILE: kubePaths(r.name).admin,
      NODE_NAME: `node${i}`,
    },
  };
}
