import { assertEquals, assertThrows } from "../../tests/assert.ts";
import {
  kubeNodeOptions,
  kubeUnderlay,
  matchPods,
  parseApiPods,
  resolveKubeDest,
  resolveKubeSource,
} from "./kube_nodes.ts";
import type { TraceNode } from "./types.ts";
import type { KubeLabRecord } from "../lab/kube_status.ts";
import { underlayAddrs } from "../lab/paths.ts";

const R: KubeLabRecord = {
  name: "kt",
  nodes: 2,
  ipFamily: "dual",
  network: "10.244.0.0/16,fc00:244::/48",
  backend: "vxlan",
  proxyMode: "iptables",
  createdAt: "2026-12-06T00:00:00.000Z",
  kubeletPids: [1, 2],
};

const pod = (ns: string, name: string, node: string, ips: string[], hostNetwork = false) => ({
  metadata: { namespace: ns, name },
  spec: { nodeName: node, hostNetwork },
  status: { podIPs: ips.map((ip) => ({ ip })) },
});

/** A node whose cni0 has the given pod namespaces (label → addresses), as the doctor gathers them. */
function node(name: string, pods: Record<string, string[]>): TraceNode {
  const m = new Map(Object.entries(pods).map(([k, ips]) => [k, { name: k, ips, mtu: 1450, ifname: "eth0" }]));
  return { name, netns: `kt-${name}`, ctx: { pods: m }, h: { close() {} } } as unknown as TraceNode;
}

const API = JSON.stringify({
  items: [
    pod("default", "web", "node2", ["10.244.1.5", "fc00:244:0:1::5"]),
    pod("kube-system", "coredns-a", "node1", ["10.244.0.2", "fc00:244::2"]),
    pod("kube-system", "kube-proxy-x", "node1", ["192.168.1.11"], true),
    pod("default", "evil\x1b[31m", "node1", ["10.244.0.9"]),
    pod("default", "bad-ip", "node1", ["10.244.0.9; rm"]),
    pod("default", "gone", "node1", ["10.244.0.77"]),
  ],
});

Deno.test("kube trace: API pods validated; hostNetwork ones and bad names or addresses left out", () => {
  assertEquals(parseApiPods(API).map((p) => [p.name, p.node, p.ips]), [
    ["default/web", "node2", ["10.244.1.5", "fc00:244:0:1::5"]],
    ["kube-system/coredns-a", "node1", ["10.244.0.2", "fc00:244::2"]],
    ["default/gone", "node1", ["10.244.0.77"]],
  ]);
  assertEquals(parseApiPods("not json"), []);
  assertEquals(parseApiPods('{"items": 7}'), []);
});

Deno.test("kube trace: each API pod is the namespace on its node's cni0 holding its addresses", () => {
  const nodes = [
    node("node1", { "pid:300": ["10.244.0.2", "fc00:244::2"] }),
    node("node2", { "pid:400": ["10.244.1.5"] }),
  ];
  const pods = matchPods(parseApiPods(API), nodes);
  // "gone" has no namespace on node1 any more: not a pod the trace can start in.
  assertEquals(pods.map((p) => [p.name, p.netns, p.ip, p.ipv6, p.node.name]), [
    ["default/web", "pid:400", "10.244.1.5", "fc00:244:0:1::5", "node2"],
    ["kube-system/coredns-a", "pid:300", "10.244.0.2", "fc00:244::2", "node1"],
  ]);
  // Source and destination by namespace/name, by a unique short name, by address; nodes by name.
  assertEquals((resolveKubeSource(R, nodes, pods, "web") as { netns: string }).netns, "pid:400");
  assertEquals(
    (resolveKubeSource(R, nodes, pods, "fc00:244::2") as { name: string }).name,
    "kube-system/coredns-a",
  );
  assertEquals(resolveKubeSource(R, nodes, pods, "node2").name, "node2");
  assertThrows(() => resolveKubeSource(R, nodes, pods, "node3"), Error, "is no pod or node of lab kt");
  assertEquals(resolveKubeDest(R, pods, "kube-system/coredns-a"), {
    ip: "10.244.0.2",
    name: "kube-system/coredns-a",
  });
  assertEquals(resolveKubeDest(R, pods, "node1").ip, underlayAddrs("kt").nodeIP(1));
  assertEquals(resolveKubeDest(R, pods, "fc00:244:0:1::5"), {
    ip: "fc00:244:0:1::5",
    name: "default/web (fc00:244:0:1::5)",
  });
  assertEquals(resolveKubeDest(R, pods, "10.244.0.200").ip, "10.244.0.200");
  assertThrows(() => resolveKubeDest(R, pods, "web;reboot"), Error, "is no pod, node or address");
});

Deno.test("kube trace: a node's files where the kubelet binds them, the API as the store, both underlay ports", () => {
  const o = kubeNodeOptions(R, 2);
  assertEquals(o.netns, "kt-node2");
  assertEquals(o.subnetFile.endsWith("/kt/node2/run-flannel/subnet.env"), true);
  assertEquals(o.cniConfDir.endsWith("/kt/node2/cni-conf"), true);
  assertEquals(o.hostLocalDir.endsWith("/kt/node2/var-lib-cni/networks"), true);
  const u = kubeUnderlay(R);
  assertEquals(u.netns, "kt-underlay");
  assertEquals(u.ports.get(underlayAddrs("kt").nodeIP(2)), "u-node2");
  assertEquals(u.ports.size, 4);
  assertEquals(kubeUnderlay({ ...R, ipFamily: "ipv4" }).ports.size, 2);
});
