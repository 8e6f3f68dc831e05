import { assertEquals } from "../../../tests/assert.ts";
import { endpointOf, type KeyedSide, privateV4, privateV6, selectMode, singleDevicePeers } from "./single.ts";

Deno.test("selectMode: flanneld's choice between a peer's IPv4 and IPv6 endpoint (mode auto)", () => {
  // No PublicIPv6: IPv4, whatever else.
  assertEquals(selectMode("10.0.0.2", null, "10.0.0.1", "2001:db8::1"), "ipv4");
  // A public PublicIP and an IPv4 address of ours: IPv4 (even with public IPv6 both sides).
  assertEquals(selectMode("192.0.2.2", "2001:db8::2", "10.0.0.1", "2001:db8::1"), "ipv4");
  // A private PublicIP, public IPv6 both sides: IPv6.
  assertEquals(selectMode("10.0.0.2", "2001:db8::2", "10.0.0.1", "2001:db8::1"), "ipv6");
  assertEquals(selectMode("172.16.0.2", "2001:db8::2", "10.0.0.1", "2001:db8::1"), "ipv6");
  assertEquals(selectMode("192.168.1.2", "2001:db8::2", "10.0.0.1", "2001:db8::1"), "ipv6");
  // A public PublicIP but no IPv4 address of ours: on to the IPv6 test.
  assertEquals(selectMode("192.0.2.2", "2001:db8::2", null, "2001:db8::1"), "ipv6");
  // The peer's or our IPv6 in fc00::/7 (ULA): IPv4 and cross fingers.
  assertEquals(selectMode("10.0.0.2", "fd00::2", "10.0.0.1", "2001:db8::1"), "ipv4");
  assertEquals(selectMode("10.0.0.2", "2001:db8::2", "10.0.0.1", "fc00::1"), "ipv4");
  assertEquals(selectMode("10.0.0.2", "2001:db8::2", "10.0.0.1", null), "ipv4");
  // 172.32/12 is not private: IPv4.
  assertEquals(selectMode("172.32.0.2", "2001:db8::2", "10.0.0.1", "2001:db8::1"), "ipv4");
  // No IPv4 side at all (IPv6-only network): IPv6.
  assertEquals(selectMode(null, "fd00::2", null, "fd00::1"), "ipv6");
});

Deno.test("privateV4/privateV6: RFC 1918 and fc00::/7 as flanneld's ip package", () => {
  for (const ip of ["10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.0.1"]) {
    assertEquals(privateV4(ip), true);
  }
  for (const ip of ["172.15.0.1", "172.32.0.1", "192.169.0.1", "11.0.0.1"]) {
    assertEquals(privateV4(ip), false);
  }
  for (const ip of ["fc00::1", "fd12:3456::1", "FD00::1"]) assertEquals(privateV6(ip), true);
  for (const ip of ["fe80::1", "2001:db8::1", "::1", "fb00::1", "fc0::1"]) assertEquals(privateV6(ip), false);
});

function side(publicKey: string, subnet: string, ip: string, port: number): KeyedSide {
  return { publicKey, subnet, publicIP: ip, endpoint: endpointOf(ip, port) };
}

Deno.test("singleDevicePeers: one peer per node with both subnets; endpoint by mode", () => {
  const v4 = [side("A", "10.244.2.0/24", "10.0.0.2", 51820), side("B", "10.244.3.0/24", "192.0.2.3", 51820)];
  const v6 = [
    side("A", "fd00:0:0:2::/64", "2001:db8::2", 51820),
    side("B", "fd00:0:0:3::/64", "fd01::3", 51820),
  ];
  const base = { our4: "10.0.0.1", our6: "2001:db8::1", pskHex: "", keepalive: 0 };
  const by = (mode: "auto" | "ipv4" | "ipv6") =>
    Object.fromEntries(singleDevicePeers(v4, v6, { ...base, mode }).map((p) => [p.publicKey, p]));
  const auto = by("auto");
  assertEquals(auto.A, {
    publicKey: "A",
    presharedKeyHex: "",
    endpoint: "[2001:db8::2]:51820",
    keepalive: 0,
    allowedIPs: ["10.244.2.0/24", "fd00:0:0:2::/64"],
  });
  assertEquals(auto.B.endpoint, "192.0.2.3:51820"); // a public PublicIP: IPv4
  assertEquals(auto.B.allowedIPs, ["10.244.3.0/24", "fd00:0:0:3::/64"]);
  assertEquals([by("ipv4").A.endpoint, by("ipv4").B.endpoint], ["10.0.0.2:51820", "192.0.2.3:51820"]);
  assertEquals([by("ipv6").A.endpoint, by("ipv6").B.endpoint], ["[2001:db8::2]:51820", "[fd01::3]:51820"]);
  // A node leased in one family only: its one subnet, the endpoint it has (whatever the mode).
  const only4 = singleDevicePeers([v4[0]], [], { ...base, mode: "ipv6" });
  assertEquals([only4[0].endpoint, only4[0].allowedIPs], ["10.0.0.2:51820", ["10.244.2.0/24"]]);
  const only6 = singleDevicePeers([], [v6[0]], { ...base, mode: "ipv4" });
  assertEquals([only6[0].endpoint, only6[0].allowedIPs], ["[2001:db8::2]:51820", ["fd00:0:0:2::/64"]]);
  // PSK and keepalive reach every peer.
  const psk = singleDevicePeers(v4, v6, { ...base, mode: "auto", pskHex: "03".repeat(32), keepalive: 25 });
  assertEquals(psk.map((p) => [p.presharedKeyHex, p.keepalive]), [["03".repeat(32), 25], [
    "03".repeat(32),
    25,
  ]]);
});
