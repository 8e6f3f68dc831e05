/**
 * A Node annotated by flanneld's udp backend (flannel ≤ v0.21: `backend-type` "" and `backend-data` "null")
 * is read by the kube store and accepted as a peer by our udp backend (the etcd leases, with a real etcd:
 * tests/store_udp_fixtures_test.ts).
 */
import { assertEquals } from "../../../tests/assert.ts";
import { leaseFromNode } from "../../store/kube/kube.ts";
import { backend } from "../../../tests/udp_fixtures.ts";

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
