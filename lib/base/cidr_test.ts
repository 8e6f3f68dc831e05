import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { IPAddr, IPNet, prefixToMask4 } from "./cidr.ts";

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
