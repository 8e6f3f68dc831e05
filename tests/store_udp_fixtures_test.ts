/**
 * Leases as flanneld's udp backend writes them (flannel ≤ v0.21, backend/udp: LeaseAttrs with only
 * PublicIP set, so Go's json.Marshal gives `{"PublicIP":…,"PublicIPv6":null}`, and before v0.12 without
 * PublicIPv6) are read by the etcd store and accepted as peers by our udp backend; our own udp lease is
 * written byte for byte the same. The kube mode's (`backend-type` "" and `backend-data` "null"):
 * lib/backend/udp/flanneld_lease_test.ts.
 */
import { assertEquals } from "./assert.ts";
import { EtcdStore } from "../lib/store/etcd/etcd.ts";
import { encodeLeaseAttrs } from "../lib/lease/wire.ts";
import { EtcdFixture, NET50 } from "./store_helpers.ts";
import { backend } from "./udp_fixtures.ts";

/** Values from flanneld's udp backend, by flannel version. */
const FLANNELD_UDP = {
  "v0.21": `{"PublicIP":"198.51.100.21","PublicIPv6":null}`,
  "v0.10": `{"PublicIP":"198.51.100.10"}`,
};

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
