/** Unit tests of iproute2-exact text forms (no kernel needed). */
import { assertEquals, assertThrows } from "../../../tests/assert.ts";
import { ParseError } from "../../base/errors.ts";
import { formatIP, formatMac, linkFlagNames, ntfNames, nudNames, parseMac, parsePrefix } from "./format.ts";
import { IPAddr } from "../../base/cidr.ts";

const v6 = (s: string) => formatIP(IPAddr.parse(s).toBytes());

Deno.test("formatIP prints like glibc inet_ntop", () => {
  assertEquals(formatIP(new Uint8Array([10, 244, 2, 0])), "10.244.2.0");
  assertEquals(v6("::"), "::");
  assertEquals(v6("::1"), "::1");
  assertEquals(v6("fe80:0:0:0:0:0:0:1"), "fe80::1");
  assertEquals(v6("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1"); // first of equal runs
  assertEquals(v6("2001:db8:0:1:1:1:1:1"), "2001:db8:0:1:1:1:1:1"); // single zero word not compressed
  assertEquals(v6("::ffff:1.2.3.4"), "::ffff:1.2.3.4");
  assertEquals(v6("::1.2.3.4"), "::1.2.3.4");
  assertEquals(v6("2001:db8::ffff:1.2.3.4"), "2001:db8::ffff:102:304");
  assertEquals(v6("FD00:0000:0000:0000:0000:0000:0000:0010"), "fd00::10");
});

Deno.test("MACs, flags, NUD and NTF names", () => {
  assertEquals(formatMac(parseMac("0A:0b:c:DD:ee:1")), "0a:0b:0c:dd:ee:01");
  assertThrows(() => parseMac("aa:bb"), ParseError, "mac");
  assertEquals(linkFlagNames(0x1 | 0x2 | 0x1000), ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"]);
  assertEquals(linkFlagNames(0x1 | 0x8 | 0x40 | 0x10000), ["LOOPBACK", "UP", "LOWER_UP"]);
  assertEquals(nudNames(0x80), ["PERMANENT"]);
  assertEquals(nudNames(0), ["NONE"]);
  assertEquals(ntfNames(0x02 | 0x10), ["self", "extern_learn"]);
});

Deno.test("parsePrefix keeps host bits and validates", () => {
  assertEquals(parsePrefix("10.1.2.3/24", "cidr").prefix, 24);
  assertEquals([...parsePrefix("10.1.2.3/24", "cidr").bytes], [10, 1, 2, 3]);
  assertEquals(parsePrefix("fd00::1", "cidr").prefix, 128);
  assertEquals(parsePrefix("default", "dst", { allowDefault: true, defaultFamily: 6 }).bytes.length, 16);
  assertThrows(() => parsePrefix("10.1.2.3/33", "dst"), ParseError, "dst");
  assertThrows(() => parsePrefix("default", "dst"), ParseError, "dst");
});
