/**
 * Realistic Node objects (~10 KB of JSON each, as a kubelet publishes: labels, annotations of other
 * components, images, conditions, addresses, nodeInfo) for the kube store's footprint test and bench.
 * @module
 */
import type { FakeApiServer, Node } from "./kube_fake_api.ts";

/** Node `i` with podCIDR 10.(i>>8).(i&255).0/24 under 10.0.0.0/8 and flannel annotations `prefix/…`. */
export function realisticNode(i: number, prefix = "flannel.alpha.coreos.com/", rv = "1"): Node {
  const name = `node-${String(i).padStart(5, "0")}`;
  const ip = `10.${200 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
  const mac = `0e:00:00:${((i >> 16) & 255).toString(16).padStart(2, "0")}:${
    ((i >> 8) & 255).toString(16).padStart(2, "0")
  }:${(i & 255).toString(16).padStart(2, "0")}`;
  const labels: Record<string, string> = {
    "kubernetes.io/hostname": name,
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "node.kubernetes.io/instance-type": "m5.2xlarge",
    "topology.kubernetes.io/region": "eu-west-1",
    "topology.kubernetes.io/zone": `eu-west-1${"abc"[i % 3]}`,
  };
  for (let k = 0; k < 20; k++) labels[`example.com/team-label-${k}`] = `value-${k}-${i}`;
  const images = Array.from({ length: 40 }, (_, k) => ({
    names: [
      `registry.example.com/team/app-${k}@sha256:${(k * 7919 + i).toString(16).padStart(64, "0")}`,
      `registry.example.com/team/app-${k}:v1.${k}.${i % 10}`,
    ],
    sizeBytes: 10_000_000 + k * 1000,
  }));
  const cond = (type: string, status: string) => ({
    type,
    status,
    lastHeartbeatTime: "2026-12-02T20:00:00Z",
    lastTransitionTime: "2026-12-01T08:00:00Z",
    reason: `Kubelet${type}`,
    message: `kubelet reports ${type} is ${status} for this node since the last transition`,
  });
  return {
    metadata: {
      name,
      resourceVersion: rv,
      labels,
      uid: crypto.randomUUID(),
      creationTimestamp: "2026-12-01T08:00:00Z",
      annotations: {
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
        [`${prefix}backend-type`]: "vxlan",
        [`${prefix}backend-data`]: JSON.stringify({ VNI: 1, VtepMAC: mac }),
        [`${prefix}kube-subnet-manager`]: "true",
        [`${prefix}public-ip`]: ip,
      },
    },
    spec: {
      podCIDR: `10.${(i >> 8) & 255}.${i & 255}.0/24`,
      podCIDRs: [`10.${(i >> 8) & 255}.${i & 255}.0/24`],
    },
    status: {
      conditions: [
        cond("MemoryPressure", "False"),
        cond("DiskPressure", "False"),
        cond("PIDPressure", "False"),
        cond("Ready", "True"),
      ],
      addresses: [{ type: "InternalIP", address: ip }, { type: "Hostname", address: name }],
      images,
      nodeInfo: {
        machineID: crypto.randomUUID().replaceAll("-", ""),
        systemUUID: crypto.randomUUID(),
        bootID: crypto.randomUUID(),
        kernelVersion: "6.8.0-45-generic",
        osImage: "Ubuntu 24.04.1 LTS",
        containerRuntimeVersion: "containerd://1.7.22",
        kubeletVersion: "v1.31.1",
        kubeProxyVersion: "v1.31.1",
        operatingSystem: "linux",
        architecture: "amd64",
      },
      capacity: { cpu: "8", memory: "32386120Ki", pods: "110", "ephemeral-storage": "101430960Ki" },
      allocatable: { cpu: "8", memory: "32283720Ki", pods: "110", "ephemeral-storage": "93478772582" },
    },
  } as unknown as Node;
}

/** Puts `count` realistic Nodes into the fake (as already present: no watch history). */
export function fillRealistic(api: FakeApiServer, count: number, prefix?: string): void {
  for (let i = 0; i < count; i++) {
    const n = realisticNode(i, prefix, String(++api.rv));
    api.nodes.set(n.metadata.name, n);
  }
}
