import { assertEquals } from "../../tests/assert.ts";
import { IPNet } from "./cidr.ts";
import { lookupRoute, v4Cidr } from "./route_lookup.ts";

Deno.test("lookupRoute: longest prefix, then metric", () => {
  const routes = [
    { net: IPNet.parse("0.0.0.0/0"), gateway: "192.0.2.1", devName: "eth0", metric: 0 },
    { net: IPNet.parse("192.0.2.0/24"), gateway: null, devName: "eth0", metric: 100 },
    { net: IPNet.parse("192.0.2.0/24"), gateway: null, devName: "eth1", metric: 50 },
  ];
  assertEquals(lookupRoute(routes, "192.0.2.7")?.devName, "eth1");
  assertEquals(lookupRoute(routes, "198.51.100.1")?.gateway, "192.0.2.1");
  assertEquals(lookupRoute(routes.slice(1), "198.51.100.1"), null);
});

Deno.test("v4Cidr: fast IPv4 CIDR parsing", () => {
  assertEquals(v4Cidr("10.244.2.0/24"), [0x0af40200, 24]);
  assertEquals(v4Cidr("255.255.255.255"), [0xffffffff, 32]);
  for (const bad of ["default", "fe80::/64", "1.2.3/8", "1.2.3.256/8", "1.2.3.4/33", "a.b.c.d", "1..2.3"]) {
    assertEquals(v4Cidr(bad), null, bad);
  }
});
