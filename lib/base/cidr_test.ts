import { assertEquals, assertThrows } from "../../tests/assert.ts";
import {
  IPAddr,
  IPNet,
  parseCidr,
  parseIp,
  parseMac,
  prefixToMask4,
  tryCidr,
  tryIp,
  tryMac,
} from "./cidr.ts";
import { ParseError } from "./errors.ts";

Deno.test("ipv4 parse/format/arith", () => {
  const a = IPAddr.parse("10.244.1.5");
  assertEquals(a.family, 4);
  assertEquals(a.toString(), "10.244.1.5");
  assertEquals(a.add(251).toString(), "10.244.2.0");
  assertEquals(IPAddr.tryParse("10.244.1.256"), null);
  assertEquals(IPAddr.tryParse("010.1.1.1"), null);
  assertEquals(IPAddr.tryParse("1.2.3"), null);
  assertEquals(IPAddr.fromBytes(a.toBytes()).toString(), "10.244.1.5");
});

Deno.test("ipv6 parse/format", () => {
  for (
    const [i, o] of [
      ["fc00::", "fc00::"],
      ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
      ["::1", "::1"],
      ["::", "::"],
      ["fe80::1:2", "fe80::1:2"],
      ["::ffff:10.1.2.3", "::ffff:a01:203"],
      ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"],
    ]
  ) assertEquals(IPAddr.parse(i).toString(), o);
  assertEquals(IPAddr.tryParse("1::2::3"), null);
  assertEquals(IPAddr.tryParse("12345::"), null);
});

Deno.test("ipnet", () => {
  const n = IPNet.parse("10.244.1.7/24");
  assertEquals(n.toString(), "10.244.1.0/24");
  assertEquals(n.toKey(), "10.244.1.0-24");
  assertEquals(IPNet.fromKey("10.244.1.0-24")!.toString(), "10.244.1.0/24");
  assertEquals(IPNet.fromKey("fc00::-64")!.toString(), "fc00::/64");
  assertEquals(n.next().toString(), "10.244.2.0/24");
  assertEquals(n.last.toString(), "10.244.1.255");
  assertEquals(n.nth(1).toString(), "10.244.1.1");
  assertEquals(IPNet.parse("10.244.0.0/16").contains(n), true);
  assertEquals(n.contains(IPNet.parse("10.244.0.0/16")), false);
  assertEquals(n.contains(IPAddr.parse("10.244.1.200")), true);
  assertEquals(n.contains(IPAddr.parse("10.244.2.0")), false);
  assertEquals(prefixToMask4(24), "255.255.255.0");
  assertEquals(prefixToMask4(0), "0.0.0.0");
  assertThrows(() => IPNet.parse("10.0.0.0/33"));
  assertThrows(() => IPNet.parse("garbage"), Error, "cidr");
});

Deno.test("brands: Ip, Cidr and Mac only from text that is one; MACs lower-cased; errors name the field", () => {
  assertEquals(tryIp("10.244.1.5"), "10.244.1.5");
  assertEquals(tryIp("fd00::1"), "fd00::1");
  // Canonical, as the kernel's dumps print it: a peer's address compares equal to the kernel's entry.
  assertEquals(tryIp("2001:DB8::5"), "2001:db8::5");
  assertEquals(tryIp("2001:db8:0:0:0:0:0:5"), "2001:db8::5");
  assertEquals(parseIp("FD00:0::1"), "fd00::1");
  assertEquals(tryCidr("2001:DB8:0::5/64"), "2001:db8::5/64");
  assertEquals(parseCidr("FD00::/48"), "fd00::/48");
  for (const bad of ["", "10.244.1.256", "10.244.1.0/24", "02:aa:00:00:00:02", null, 7]) {
    assertEquals(tryIp(bad), null);
  }
  assertEquals(tryCidr("10.244.1.5/24"), "10.244.1.5/24");
  for (const bad of ["", "10.244.1.5", "10.244.1.0/33", "default", undefined]) {
    assertEquals(tryCidr(bad), null);
  }
  assertEquals(tryMac("02:AA:00:00:00:0f"), "02:aa:00:00:00:0f");
  for (const bad of ["", "02:aa:00:00:00", "02-aa-00-00-00-02", "10.0.0.1", "02:aa:00:00:00:0g"]) {
    assertEquals(tryMac(bad), null);
  }
  assertEquals(parseIp("192.0.2.1"), "192.0.2.1");
  assertEquals(IPAddr.parse("10.0.0.1").toString(), parseIp("10.0.0.1"));
  assertEquals(IPNet.parse("10.0.0.7/8").toString(), parseCidr("10.0.0.0/8"));
  assertThrows(() => parseIp("192.0.2.x", "PublicIP"), ParseError, "PublicIP");
  assertThrows(() => parseCidr("192.0.2.0", "Network"), ParseError, "Network");
  assertThrows(() => parseMac("nope", "VtepMAC"), ParseError, "VtepMAC");
});
