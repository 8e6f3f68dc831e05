import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { parseSubnetEnv } from "../node/subnet_env.ts";
import { buildDelegate, loadFlannelConf } from "./flannel.ts";
import { CniError } from "./spec.ts";

const ENV = parseSubnetEnv(
  "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
);

Deno.test("flannel delegate: rendered as flannel's plugin does, keys sorted", () => {
  const n = loadFlannelConf({
    cniVersion: "0.3.1",
    name: "cbr0",
    type: "flannel",
    delegate: { hairpinMode: true },
  });
  assertEquals(
    JSON.stringify(buildDelegate(n, ENV)),
    '{"cniVersion":"0.3.1","hairpinMode":true,"ipMasq":false,"ipam":{"ranges":[[{"subnet":"10.244.1.0/24"}]],' +
      '"routes":[{"dst":"10.244.0.0/16"}],"type":"host-local"},"isGateway":true,"mtu":1450,"name":"cbr0",' +
      '"type":"bridge"}',
  );
  // Explicit delegate values win; non-bridge delegates get no isGateway.
  const m = loadFlannelConf({ name: "x", delegate: { type: "ptp", mtu: 1400, ipMasq: true } });
  const d = buildDelegate(m, { ...ENV, ipMasq: false });
  assertEquals([d.type, d.mtu, d.ipMasq, d.isGateway, d.cniVersion], [
    "ptp",
    1400,
    true,
    undefined,
    undefined,
  ]);
  assertEquals(m.dataDir, "/var/lib/cni/flannel");
  assertEquals(m.subnetFile, "/run/flannel/subnet.env");
});

Deno.test("flannel config: delegate must not carry name or ipam", () => {
  assertThrows(() => loadFlannelConf({ name: "x", delegate: { name: "y" } }), CniError, "'name'");
  assertThrows(() => loadFlannelConf({ name: "x", delegate: { ipam: {} } }), CniError, "'ipam'");
  assertThrows(() => loadFlannelConf({ name: "x", delegate: { type: 1 } }), CniError, "type");
  assertThrows(() => loadFlannelConf({ name: "x", delegate: [] }), CniError);
});

Deno.test("flannel delegate: dual stack and IPv6-only give one range set per family and a route per network", () => {
  const n = loadFlannelConf({ cniVersion: "1.0.0", name: "cbr0", type: "flannel" });
  const dual = parseSubnetEnv(
    "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_IPV6_NETWORK=fc00:244::/48\n" +
      "FLANNEL_IPV6_SUBNET=fc00:244:0:3::1/64\nFLANNEL_MTU=1430\nFLANNEL_IPMASQ=true\n",
  );
  assertEquals(buildDelegate(n, dual).ipam, {
    ranges: [[{ subnet: "10.244.3.0/24" }], [{ subnet: "fc00:244:0:3::/64" }]],
    routes: [{ dst: "10.244.0.0/16" }, { dst: "fc00:244::/48" }],
    type: "host-local",
  });
  const v6 = parseSubnetEnv(
    "FLANNEL_IPV6_NETWORK=fc00:244::/48\nFLANNEL_IPV6_SUBNET=fc00:244:0:3::1/64\nFLANNEL_MTU=1430\n" +
      "FLANNEL_IPMASQ=false\n",
  );
  const d = buildDelegate(n, v6);
  assertEquals([d.ipam, d.ipMasq, d.mtu], [
    {
      ranges: [[{ subnet: "fc00:244:0:3::/64" }]],
      routes: [{ dst: "fc00:244::/48" }],
      type: "host-local",
    },
    true,
    1430,
  ]);
});
