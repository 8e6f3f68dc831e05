import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { UsageError } from "../base/errors.ts";
import { IPNet } from "../base/cidr.ts";
import { parseNetConfig } from "../config/netconf.ts";
import { checkReservationInNetwork, reservationRequest } from "./reservation.ts";

const n = IPNet.parse;

Deno.test("reservationRequest: the public IP matches the subnet's family; SUBNET6 needs --public-ipv6", () => {
  const r = reservationRequest(n("10.5.7.0/24"), null, "192.0.2.7", undefined);
  assertEquals([r.subnet.toString(), r.publicIP.toString(), r.publicIPv6, r.v6], [
    "10.5.7.0/24",
    "192.0.2.7",
    null,
    undefined,
  ]);
  const d = reservationRequest(n("10.5.7.0/24"), n("fc00:0:0:7::/64"), "192.0.2.7", "fc00::7");
  assertEquals([d.v6?.subnet.toString(), d.v6?.publicIP], ["fc00:0:0:7::/64", "fc00::7"]);
  const bad: [IPNet, IPNet | null, string | undefined, string | undefined, string][] = [
    [n("10.5.7.0/24"), null, undefined, undefined, "--public-ip: required"],
    [n("10.5.7.0/24"), null, "nope", undefined, "--public-ip: 'nope' is not an IP address"],
    [
      n("10.5.7.0/24"),
      null,
      "fc00::7",
      undefined,
      "--public-ip: fc00::7 is IPv6 but SUBNET 10.5.7.0/24 is IPv4",
    ],
    [n("fc00:0:0:7::/64"), n("10.5.7.0/24"), "fc00::7", "fc00::7", "SUBNET6: 10.5.7.0/24 must be IPv6"],
    [n("10.5.7.0/24"), null, "192.0.2.7", "192.0.2.8", "--public-ipv6: '192.0.2.8' is not an IPv6 address"],
    [n("10.5.7.0/24"), n("fc00:0:0:7::/64"), "192.0.2.7", undefined, "--public-ipv6: required with SUBNET6"],
  ];
  for (const [s, s6, ip, ip6, msg] of bad) {
    assertThrows(() => reservationRequest(s, s6, ip, ip6), UsageError, msg);
  }
});

Deno.test("checkReservationInNetwork: a /SubnetLen of the network; both families in dual stack", () => {
  const v4 = parseNetConfig(JSON.stringify({ Network: "10.5.0.0/16", Backend: { Type: "vxlan" } }));
  checkReservationInNetwork(v4, reservationRequest(n("10.5.7.0/24"), null, "192.0.2.7", undefined));
  assertThrows(
    () => checkReservationInNetwork(v4, reservationRequest(n("10.6.7.0/24"), null, "192.0.2.7", undefined)),
    UsageError,
    "SUBNET: 10.6.7.0/24 is not a /24 subnet of the network 10.5.0.0/16",
  );
  const dual = parseNetConfig(JSON.stringify({
    Network: "10.5.0.0/16",
    EnableIPv6: true,
    IPv6Network: "fc00::/48",
    Backend: { Type: "vxlan" },
  }));
  assertThrows(
    () => checkReservationInNetwork(dual, reservationRequest(n("10.5.7.0/24"), null, "192.0.2.7", undefined)),
    UsageError,
    "SUBNET6: required in a dual-stack network",
  );
  checkReservationInNetwork(
    dual,
    reservationRequest(n("10.5.7.0/24"), n("fc00:0:0:7::/64"), "192.0.2.7", "fc00::7"),
  );
});
