/**
 * A healthy flannel node in namespaces for the doctor tests: node netns N with an underlay veth to a peer
 * node P, flannel.1 on both with each other's ARP/FDB/route entries, cni0 with one pod (veth, host-local
 * IP file, flannel data, libcni cache), masquerade/forward rules, a file store with both leases, a temp
 * subnet.env and temp CNI dirs. Tests break one thing at a time and run `flanctl doctor` on N.
 * @module
 */
import { FileStore } from "../lib/store/file/file.ts";
import { IPNet } from "../lib/base/cidr.ts";
import type { FindingId, Severity } from "../lib/doctor/mod.ts";
import { daemonStatePath, ownDaemonState, procStartTicks } from "../lib/node/daemon_state.ts";
import { flanctl, type NetnsFixture, nsSh, sh, TEST_PREFIX, withNetns } from "./netns.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";

/** A built fixture. */
export interface DoctorNode {
  /** Node namespace (the one checked). */
  node: string;
  /** Peer node namespace. */
  peer: string;
  /** The pod namespace on the node. */
  pod: string;
  /** Prefix shared by this fixture's pod namespaces (`--pod-netns-prefix`). */
  prefix: string;
  /** Temp dir holding every file of the node. */
  dir: string;
  subnetFile: string;
  storeDir: string;
  confDir: string;
  binDir: string;
  dataDir: string;
  flannelDir: string;
  resultsDir: string;
  /** Host end of the pod's veth. */
  podVeth: string;
  /** VTEP MACs. */
  nodeMac: string;
  peerMac: string;
  /** Stand-in for the daemon: a process in the node namespace named by flanctl.json next to subnet.env. */
  daemon: Deno.ChildProcess;
}

export const NODE_MAC = "0a:00:00:00:01:01";
export const PEER_MAC = "0a:00:00:00:02:02";
export const NODE_IP = "192.0.2.10";
export const PEER_IP = "192.0.2.11";
export const CONTAINER_ID = "c0ffee0000000001";

/** JSON of a `flanctl doctor -o json` run, with the exit code. */
export interface DoctorRun {
  code: number;
  summary: {
    status: string;
    exitCode: number;
    ok: number;
    warning: number;
    critical: number;
    unknown: number;
  };
  checks: { id: FindingId; severity: Severity; detail: string; fix: string[]; why: string | null }[];
  stdout: string;
  stderr: string;
}

function rnd(): string {
  return crypto.getRandomValues(new Uint32Array(1))[0].toString(36).padStart(6, "0").slice(0, 6);
}

async function vxlanNode(
  ns: string,
  o: { ip: string; mac: string; subnet: string; peerSubnet: string; peerIP: string; peerMac: string },
) {
  const sub = IPNet.parse(o.subnet);
  const psub = IPNet.parse(o.peerSubnet);
  const batch = [
    `link add flannel.1 address ${o.mac} mtu 1450 type vxlan id 1 local ${o.ip} dev eth0 dstport 8472 nolearning`,
    `addr add ${sub.ip}/32 dev flannel.1`,
    `link set flannel.1 up`,
    `neigh replace ${psub.ip} lladdr ${o.peerMac} dev flannel.1 nud permanent`,
    `route replace ${psub} via ${psub.ip} dev flannel.1 onlink`,
  ].join("\n") + "\n";
  await sh("sh", "-c", `ip -n ${ns} -batch - <<'EOF'\n${batch}EOF`);
  await sh(
    "bridge",
    "-n",
    ns,
    "fdb",
    "replace",
    o.peerMac,
    "dev",
    "flannel.1",
    "dst",
    o.peerIP,
    "self",
    "permanent",
  );
  await nsSh(ns, "ethtool", "-K", "flannel.1", "tx-checksum-ip-generic", "off");
  await nsSh(ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1");
}

/** Builds the healthy node. Every namespace is registered in `fx` (cleaned up by the caller). */
async function buildNode(fx: NetnsFixture): Promise<DoctorNode> {
  const node = await fx.add("dn");
  const peer = await fx.add("dq");
  const prefix = `${TEST_PREFIX}p${rnd()}`;
  const pod = `${prefix}a`;
  await sh("ip", "netns", "add", pod);
  fx.names.push(pod);
  await sh("ip", "-n", pod, "link", "set", "lo", "up");
  const dir = await Deno.makeTempDir({ prefix: "flanctl-doctor-" });
  const podVeth = `veth${rnd()}`;

  // Underlay: eth0 (node) <-> eth0 (peer).
  await sh("ip", "-n", node, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", peer);
  await sh("ip", "-n", node, "addr", "add", `${NODE_IP}/24`, "dev", "eth0");
  await sh("ip", "-n", peer, "addr", "add", `${PEER_IP}/24`, "dev", "eth0");
  await sh("ip", "-n", node, "link", "set", "eth0", "up");
  await sh("ip", "-n", peer, "link", "set", "eth0", "up");
  await vxlanNode(node, {
    ip: NODE_IP,
    mac: NODE_MAC,
    subnet: "10.244.1.0/24",
    peerSubnet: "10.244.2.0/24",
    peerIP: PEER_IP,
    peerMac: PEER_MAC,
  });
  await vxlanNode(peer, {
    ip: PEER_IP,
    mac: PEER_MAC,
    subnet: "10.244.2.0/24",
    peerSubnet: "10.244.1.0/24",
    peerIP: NODE_IP,
    peerMac: NODE_MAC,
  });

  // cni0 and one pod.
  const podBatch = [
    `link add cni0 mtu 1450 type bridge`,
    `addr add 10.244.1.1/24 dev cni0`,
    `link set cni0 up`,
    `link add ${podVeth} mtu 1450 type veth peer name eth0 netns ${pod}`,
    `link set ${podVeth} master cni0`,
    `link set ${podVeth} up`,
  ].join("\n") + "\n";
  await sh("sh", "-c", `ip -n ${node} -batch - <<'EOF'\n${podBatch}EOF`);
  await sh("bridge", "-n", node, "link", "set", "dev", podVeth, "hairpin", "on");
  await sh("ip", "-n", pod, "addr", "add", "10.244.1.2/24", "dev", "eth0");
  await sh("ip", "-n", pod, "link", "set", "eth0", "mtu", "1450", "up");
  await sh("ip", "-n", pod, "route", "add", "default", "via", "10.244.1.1");

  // iptables exactly as flannel writes them.
  const c = (x: string) => `-m comment --comment "flanneld ${x}"`;
  const rules = [
    "*nat",
    ":FLANNEL-POSTRTG - [0:0]",
    `-A POSTROUTING ${c("masq")} -j FLANNEL-POSTRTG`,
    `-A FLANNEL-POSTRTG -m mark --mark 0x4000/0x4000 ${c("masq")} -j RETURN`,
    `-A FLANNEL-POSTRTG -s 10.244.1.0/24 -d 10.244.0.0/16 ${c("masq")} -j RETURN`,
    `-A FLANNEL-POSTRTG -s 10.244.0.0/16 -d 10.244.1.0/24 ${c("masq")} -j RETURN`,
    `-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.1.0/24 ${c("masq")} -j RETURN`,
    `-A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 ${c("masq")} -j MASQUERADE --random-fully`,
    `-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.0.0/16 ${c("masq")} -j MASQUERADE --random-fully`,
    "COMMIT",
    "*filter",
    ":FORWARD DROP [0:0]",
    ":FLANNEL-FWD - [0:0]",
    `-A FORWARD ${c("forward")} -j FLANNEL-FWD`,
    `-A FLANNEL-FWD -s 10.244.0.0/16 ${c("forward")} -j ACCEPT`,
    `-A FLANNEL-FWD -d 10.244.0.0/16 ${c("forward")} -j ACCEPT`,
    "COMMIT",
  ].join("\n") + "\n";
  await sh("sh", "-c", `ip netns exec ${node} iptables-restore <<'EOF'\n${rules}EOF`);

  // Files.
  const n: DoctorNode = {
    node,
    peer,
    pod,
    prefix,
    dir,
    subnetFile: `${dir}/subnet.env`,
    storeDir: `${dir}/store`,
    confDir: `${dir}/net.d`,
    binDir: `${dir}/bin`,
    dataDir: `${dir}/networks`,
    flannelDir: `${dir}/flannel`,
    resultsDir: `${dir}/results`,
    podVeth,
    nodeMac: NODE_MAC,
    peerMac: PEER_MAC,
    daemon: new Deno.Command("ip", {
      args: ["netns", "exec", node, "sleep", "3600"],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn(),
  };
  await writeDaemonStandIn(n);
  await Deno.writeTextFile(
    n.subnetFile,
    "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
  );
  for (const d of [n.confDir, n.binDir, `${n.dataDir}/cbr0`, n.flannelDir, n.resultsDir]) {
    await Deno.mkdir(d, { recursive: true });
  }
  await Deno.writeTextFile(
    `${n.confDir}/10-flannel.conflist`,
    JSON.stringify({
      name: "cbr0",
      cniVersion: "0.3.1",
      plugins: [
        { type: "flannel", delegate: { hairpinMode: true, isDefaultGateway: true } },
        { type: "portmap", capabilities: { portMappings: true } },
      ],
    }),
  );
  for (const b of ["flannel", "bridge", "host-local", "loopback", "portmap"]) {
    await Deno.writeTextFile(`${n.binDir}/${b}`, "#!/bin/sh\nexit 0\n", { mode: 0o755 });
  }
  await Deno.writeTextFile(`${n.dataDir}/cbr0/10.244.1.2`, `${CONTAINER_ID}\r\neth0`);
  await Deno.writeTextFile(`${n.dataDir}/cbr0/last_reserved_ip.0`, "10.244.1.2");
  await Deno.writeTextFile(`${n.flannelDir}/${CONTAINER_ID}`, "{}");
  await Deno.writeTextFile(`${n.resultsDir}/cbr0-${CONTAINER_ID}-eth0`, "{}");

  // The store: network config and both leases.
  const store = new FileStore({ dir: n.storeDir });
  try {
    await store.setNetworkConfig(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }));
    for (
      const [sub, ip, mac] of [["10.244.1.0/24", NODE_IP, NODE_MAC], ["10.244.2.0/24", PEER_IP, PEER_MAC]]
    ) {
      await store.acquireLease(
        { PublicIP: ip, BackendType: "vxlan", BackendData: { VNI: 1, VtepMAC: mac } },
        { previousSubnet: IPNet.parse(sub) },
      );
    }
  } finally {
    await store.close();
  }
  return n;
}

/** The doctor flags pointing at the fixture's files. */
export function doctorArgs(n: DoctorNode, ...extra: string[]): string[] {
  return [
    "doctor",
    "--netns",
    n.node,
    "--subnet-file",
    n.subnetFile,
    "--store-dir",
    n.storeDir,
    "--cni-conf-dir",
    n.confDir,
    "--cni-bin-dir",
    n.binDir,
    "--cni-data-dir",
    n.dataDir,
    "--flannel-data-dir",
    n.flannelDir,
    "--cni-results-dir",
    n.resultsDir,
    "--pod-netns-prefix",
    n.prefix,
    // The fixture runs no CRI runtime; a host's containerd must not be asked about the fixture's pods.
    "--cri-socket",
    "none",
    ...extra,
  ];
}

/** Runs `flanctl doctor -o json` on the fixture node and parses the report. */
export async function runDoctorJson(n: DoctorNode, ...extra: string[]): Promise<DoctorRun> {
  const r = await flanctl(doctorArgs(n, "-o", "json", ...extra));
  let doc: Omit<DoctorRun, "code" | "stdout" | "stderr">;
  try {
    doc = JSON.parse(r.stdout);
  } catch {
    throw new Error(`doctor printed no JSON (exit ${r.code}): ${r.stdout}\n${r.stderr}`);
  }
  return { code: r.code, ...doc, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Asserts exactly one finding `id` with this severity whose detail contains `detail` (and, unless ok, a
 * fix); returns it.
 */
export function expectFinding(run: DoctorRun, id: FindingId, severity: Severity, detail: string) {
  const f = findings(run, id);
  assertEquals(f.length, 1, `expected one ${id} finding:\n${run.stdout}`);
  assertEquals(f[0].severity, severity, `${id}: ${f[0].detail}`);
  assertStringIncludes(f[0].detail, detail);
  if (severity !== "ok") assertEquals(f[0].fix.length > 0, true, `${id} has no fix`);
  return f[0];
}

/** The findings with this id. */
export function findings(run: DoctorRun, id: FindingId) {
  return run.checks.filter((c) => c.id === id);
}

/**
 * Runs `fn` on a freshly built healthy node; always removes the node's temp dir and namespaces afterwards,
 * also when `fn` fails.
 */
export function withDoctorNode<T>(fn: (n: DoctorNode, fx: NetnsFixture) => Promise<T>): Promise<T> {
  return withNetns(async (fx) => {
    const n = await buildNode(fx);
    try {
      return await fn(n, fx);
    } finally {
      await removeNode(n);
    }
  });
}

/** Kills a helper process a test started (if any) and waits for it to exit. */
export async function killChild(p: Deno.ChildProcess | null): Promise<void> {
  if (!p) return;
  try {
    p.kill("SIGKILL");
  } catch { /* gone */ }
  await p.status;
}

/** Removes the fixture's temp dir and its daemon stand-in (namespaces are removed by the NetnsFixture). */
async function removeNode(n: DoctorNode | null): Promise<void> {
  if (!n) return;
  await killChild(n.daemon);
  await Deno.remove(n.dir, { recursive: true }).catch(() => {});
}

/** Writes the daemon state file naming the stand-in process (as a running daemon would). */
export async function writeDaemonStandIn(n: DoctorNode): Promise<void> {
  const state = {
    ...ownDaemonState("0.1.0", null, n.subnetFile),
    pid: n.daemon.pid,
    procStart: procStartTicks(n.daemon.pid),
    startedAt: "2026-01-01T00:00:00.000Z",
  };
  await Deno.writeTextFile(daemonStatePath(n.subnetFile), JSON.stringify(state));
}

/** Replaces netns names, prefixes, temp dirs, MACs and times so output can be compared to a snapshot. */
export function normalize(text: string, n: DoctorNode): string {
  return text
    .replaceAll(n.dir, "<DIR>")
    .replaceAll(n.node, "<NODE>")
    .replaceAll(n.peer, "<PEER>")
    .replaceAll(n.pod, "<POD>")
    .replaceAll(n.prefix, "<PREFIX>")
    .replaceAll(n.podVeth, "<VETH>")
    .replace(
      /nf_conntrack_count = \d+, nf_conntrack_max = \d+/,
      "nf_conntrack_count = <N>, nf_conntrack_max = <M>",
    )
    .replace(/gc_thresh3 = \d+/, "gc_thresh3 = <T>")
    .replace(/(only process|-p|nsenter -t) \d+/g, "$1 <PID>")
    .replace(/pid:\d+/g, "pid:<PID>")
    .replace(/\bpid \d+/g, "pid <PID>")
    .replace(
      /(arp|ndisc)_cache: \d+ entries host-wide(?: \(\d+ permanent, not counted\))?, gc_thresh1\/2\/3 \d+\/\d+\/\d+ \(\d+% of gc_thresh3\); table_fulls \+\d+, forced_gc_runs \+\d+ in \d+ ms \(\d+, \d+ since boot\)/g,
      "$1_cache: <E> entries host-wide, gc_thresh1/2/3 <T> (<P>% of gc_thresh3); table_fulls +<N>, " +
        "forced_gc_runs +<N> in <MS> ms (<N>, <N> since boot)",
    )
    .replace(/\(\d+%\)/g, "(<P>%)")
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z \(-?\d+ min from now\)/g, "<EXPIRY>")
    .replace(/(?:[0-9a-f]{2}:){5}[0-9a-f]{2}/g, (m) => m === NODE_MAC || m === PEER_MAC ? m : "<MAC>");
}
