/**
 * Our udp backend as the udp-fixture tests ask it about peers (lib/backend/udp/flanneld_lease_test.ts,
 * tests/store_udp_fixtures_test.ts): no kernel state is touched.
 * @module
 */
import { UdpBackend } from "../lib/backend/udp/backend.ts";
import { IPNet } from "../lib/base/cidr.ts";
import type { NetlinkHandle } from "../lib/netlink/types.ts";

/** A udp backend on eth0 198.51.100.1 in 10.5.0.0/16, port 8285. */
export const backend = () =>
  new UdpBackend(
    {} as NetlinkHandle, // peer() and construction touch no kernel state
    { port: 8285 },
    { name: "eth0", index: 2, mtu: 1500, ifaceIP: "198.51.100.1", publicIP: "198.51.100.1" },
    IPNet.parse("10.5.0.0/16"),
  );
