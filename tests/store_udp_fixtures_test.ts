/**
 * Leases as flanneld's udp backend writes them (flannel ≤ v0.21, backend/udp: LeaseAttrs with only
 * PublicIP set, so Go's json.Marshal gives `{"PublicIP":…,"PublicIPv6":null}`, and before v0.12 without
 * PublicIPv6; in kube mode `backend-type` "" and `backend-data` "null") are read by the etcd and kube
 * stores and accepted as peers by our udp backend; our own udp lease is written byte for byte the same.
 */
import { assertEquals } from "./assert.ts";
import { EtcdStore } from "../lib/store/etcd/etcd.ts";
import { leaseFromNode } from "../lib/store/kube/kube.ts";
import { encodeLeaseAttrs } from "../lib/lease/wire.ts";
import { UdpBackend } from "../lib/backend/udp/backend.ts";
import { IPNet } from "../lib/base/cidr.ts";
import type { NetlinkHandle } from "../lib/netlink/types.ts";
import { EtcdFixture, NET50 } from "./store_helpers.ts";

/** Values from flanneld's udp backend, by flannel version. */
const FLANNELD_UDP = {
  "v0.21": `{"PublicIP":"198.51.100.21","PublicIPv6":null}`,
  "v0.10": `{"PublicIP":"198.51.100.10"}`,
};

const backend = () =>
  new UdpBackend(
    {} as NetlinkHandle, // peer() and construction touch no kernel state
    { port: 8285 },
    { name: "eth0", index: 2, mtu: 1500, ifaceIP: "198.51.100.1", publicIP: "198.51.100.1" },
    IPNet.parse("10.5.0.0/16"),
  );

Deno.test("udp fixtures: flanneld udp leases from etcd are peers; ours is encoded the same", async () => {
  const etcd = new EtcdFixture();
  try {
    await etcd.start();
    const prefix = "/udpfix/coreos.com/network";
    const s = new EtcdStore({ endpoints: [etcd.url], prefix });
    try {
      await s.setNetworkConfig(NET50);
      await etcd.ctl("put", `${prefix}/subnets/10.5.21.0-24`, FLANNELD_UDP["v0.21"]);
      await etcd.ctl("put", `${prefix}/subnets/10.5.10.0-24`, FLANNELD_UDP["v0.10"]);
      const { leases } = await s.listLeases();
      const got = leases.map((l) => [String(l.subnet), l.attrs.PublicIP, l.attrs.BackendType]).sort();
      assertEquals(got, [["10.5.10.0/24", "198.51.100.10", ""], ["10.5.21.0/24", "198.51.100.21", ""]]);
      const b = backend();
      for (const l of leases) {
        const d = b.peer({
          subnet: l.subnet!,
          publicIP: l.attrs.PublicIP,
          backendType: l.attrs.BackendType,
          backendData: l.attrs.BackendData,
        });
        assertEquals(typeof d, "object", String(d));
      }
      // What our daemon writes for a udp lease is flanneld's v0.21 value.
      assertEquals(
        encodeLeaseAttrs({ PublicIP: "198.51.100.21", PublicIPv6: null, BackendType: b.leaseBackendType }),
        FLANNELD_UDP["v0.21"],
      );
      assertEquals(b.backendData(), null);
      assertEquals(b.mtu, 1472);
    } finally {
      await s.close();
    }
  } finally {
    await etcd.cleanup();
  }
});

Deno.test("udp fixtures: a kube node annotated by flanneld's udp backend is a peer", () => {
  const l = leaseFromNode(
    {
      metadata: {
        name: "n7",
        resourceVersion: "1",
        annotations: {
          "flannel.alpha.coreos.com/public-ip": "198.51.100.7",
          "flannel.alpha.coreos.com/backend-type": "",
          "flannel.alpha.coreos.com/backend-data": "null",
          "flannel.alpha.coreos.com/kube-subnet-manager": "true",
        },
      },
      spec: { podCIDR: "10.5.7.0/24" },
    } as unknown as Parameters<typeof leaseFromNode>[0],
  )!;
  assertEquals([String(l.subnet), l.attrs.PublicIP, l.attrs.BackendType], [
    "10.5.7.0/24",
    "198.51.100.7",
    "",
  ]);
  const d = backend().peer({
    subnet: l.subnet!,
    publicIP: l.attrs.PublicIP,
    backendType: l.attrs.BackendType,
    backendData: l.attrs.BackendData,
  });
  assertEquals(typeof d, "object", String(d));
  assertEquals(
    typeof backend().peer({
      ...{ subnet: l.subnet!, publicIP: "1.2.3.4" },
      backendType: "vxlan",
      backendData: null,
    }),
    "string",
  );
});
