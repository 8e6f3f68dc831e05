import { assert, assertEquals, assertStringIncludes, assertThrows } from "../../tests/assert.ts";
import {
  containerdConfig,
  findProgram,
  imageNameOfIndex,
  kubeExecArgv,
  KubeLabError,
  kubeletConfig,
  labPodManifest,
  manifestWithNetworkPolicy,
  nodeScript,
  pkiScript,
} from "./kube.ts";

Deno.test("kube lab: a node's script checks every bind before it starts anything", () => {
  const s = nodeScript({
    nodeDir: "/l/node1",
    ip: "192.0.2.11",
    node: "node1",
    pki: "/l/pki",
    images: ["/l/sandbox.tar", "/l/image.tar"],
    progs: { containerd: "/usr/bin/containerd", ctr: "/usr/bin/ctr", kubelet: "/k/kubelet" },
  });
  const lines = s.split("\n");
  const firstStart = lines.findIndex((l) => l.startsWith("/usr/bin/containerd"));
  for (
    const dst of [
      "/opt/cni/bin",
      "/etc/cni/net.d",
      "/var/lib/cni",
      "/run/flannel",
      "/run/netns",
      "/var/log/pods",
    ]
  ) {
    const bind = lines.findIndex((l) => l.startsWith("mount --bind") && l.endsWith(` ${dst}`));
    const check = lines.findIndex((l) => l.includes(`bind ${dst} failed`));
    assert(bind >= 0 && check > bind && check < firstStart, `${dst}: bound and checked before containerd`);
  }
  assertEquals(lines[0], "set -e");
  assertStringIncludes(s, "images import /l/sandbox.tar");
  assertStringIncludes(s, "exec /k/kubelet --config=/l/node1/kubelet.yaml");
});

Deno.test("kube lab: kubelet and containerd configs carry the facts measured here", () => {
  const k = kubeletConfig("/l/node1", "192.0.2.11", "/l/pki", "node1");
  for (
    const want of [
      "failCgroupV1: false",
      "cgroupDriver: cgroupfs",
      "cgroupsPerQOS: false",
      'address: "192.0.2.11"',
      'clusterDNS: ["10.96.0.10"]',
      'clusterDomain: "cluster.local"',
    ]
  ) {
    assertStringIncludes(k, want);
  }
  const c = containerdConfig("/l/node1");
  assertStringIncludes(c, "restrict_oom_score_adj = true");
  assertStringIncludes(c, 'sandbox_image = "flanctl.local/pause:busybox"');
  assertStringIncludes(c, 'address = "/l/node1/containerd/sock"');
  const p = pkiScript("/l/pki", "192.0.2.1", ["192.0.2.11"]);
  assertStringIncludes(p, "IP:192.0.2.1,IP:127.0.0.1,IP:10.96.0.1");
  assertStringIncludes(p, '"/O=system:nodes/CN=system:node:node1" "IP:192.0.2.11"');
});

Deno.test("kube lab: add-pod's Pod is pinned, never pulled, and publishes its hostPort", () => {
  const pod = labPodManifest("node1-pod-x", "node1", [{
    hostPort: 18080,
    containerPort: 8080,
    protocol: "tcp",
  }]);
  // deno-lint-ignore no-explicit-any
  const spec = (pod as any).spec;
  assertEquals(spec.nodeName, "node1");
  assertEquals(spec.containers[0].imagePullPolicy, "Never");
  assertEquals(spec.containers[0].ports, [{ containerPort: 8080, hostPort: 18080, protocol: "TCP" }]);
  assertEquals(spec.containers[0].command.slice(0, 4), ["/bin/busybox", "httpd", "-f", "-p"]);
});

Deno.test("kube lab: FLANCTL_PEER_<NAME> overrides where a program is found; a bad override is none", () => {
  assertEquals(
    findProgram("kube-scheduler", { FLANCTL_PEER_KUBE_SCHEDULER: "/bin/sh", PATH: "" }),
    "/bin/sh",
  );
  assertEquals(findProgram("kubelet", { FLANCTL_PEER_KUBELET: "/nonexistent/kubelet", PATH: "/bin" }), null);
  assertEquals(
    findProgram("sh", { PATH: "/nonexistent:/bin", FLANCTL_DEV_CACHE: "/nonexistent" }),
    "/bin/sh",
  );
});

Deno.test("kube lab: a peer archive's image name comes from its index, validated", () => {
  const index = (name: unknown) =>
    JSON.stringify({ manifests: [{ annotations: { "io.containerd.image.name": name } }] });
  assertEquals(
    imageNameOfIndex(index("flanctl.local/coredns:v1.15.0"), "a"),
    "flanctl.local/coredns:v1.15.0",
  );
  for (const bad of ["", "X\u001b[31m", 42, "a b"]) {
    let err = "";
    try {
      imageNameOfIndex(index(bad), "a.tar");
    } catch (e) {
      err = String(e);
    }
    assertStringIncludes(err, "a.tar: its index.json names no image");
  }
  let err = "";
  try {
    imageNameOfIndex("{not json", "b.tar");
  } catch (e) {
    err = String(e);
  }
  assertStringIncludes(err, "b.tar");
});

Deno.test("kube lab: lab exec on a node enters its kubelet's namespaces, the API as its store", () => {
  const r = {
    name: "k1",
    nodes: 2,
    ipFamily: "ipv4" as const,
    network: "10.244.0.0/16",
    backend: "vxlan",
    proxyMode: "iptables",
    createdAt: "",
    kubeletPids: [101, 202],
  };
  const { argv, env } = kubeExecArgv(r, "node2", ["flanctl", "doctor"], () => true);
  assertEquals(argv, ["nsenter", "-t", "202", "-m", "-n", "--", "flanctl", "doctor"]);
  assertEquals(env.NODE_NAME, "node2");
  assertEquals(env.FLANNELD_KUBE_SUBNET_MGR, "true");
  for (const bad of ["node3", "node0", "node1-pod1", "x"]) {
    let err = "";
    try {
      kubeExecArgv(r, bad, ["true"], () => true);
    } catch (e) {
      err = String(e);
    }
    assertStringIncludes(err, `lab 'k1' has no node '${bad}' (known: node1, node2`);
  }
  let err = "";
  try {
    kubeExecArgv(r, "node1", ["true"], () => false);
  } catch (e) {
    err = String(e);
  }
  assertStringIncludes(err, "the kubelet of node1 is not running");
});

Deno.test("lab up --kube --network-policy: the manifest's FLANNELD_NETWORK_POLICY switch turned on", async () => {
  const { parseAllDocuments } = await import("yaml");
  const text = await Deno.readTextFile(new URL("../../deploy/kube-flanctl.yml", import.meta.url));
  const envOf = (t: string) => {
    const ds = parseAllDocuments(t).map((d) => d.toJS()).find((d) => d?.kind === "DaemonSet");
    return ds.spec.template.spec.containers[0].env as { name: string; value?: string }[];
  };
  assert(!envOf(text).some((e) => e.name === "FLANNELD_NETWORK_POLICY"), "off in the manifest as shipped");
  const on = manifestWithNetworkPolicy(text);
  assertEquals(envOf(on).filter((e) => e.name === "FLANNELD_NETWORK_POLICY"), [
    { name: "FLANNELD_NETWORK_POLICY", value: "true" },
  ]);
  assertEquals(on.split("\n").length, text.split("\n").length, "only the two lines change");
  assertThrows(() => manifestWithNetworkPolicy("kind: DaemonSet\n"), KubeLabError, "FLANNELD_NETWORK_POLICY");
});
