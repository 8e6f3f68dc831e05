/** listHostNetns without namespaces of its own (the pairing across namespaces, as root: tests/netlink_veths_test.ts). */
import { assertEquals } from "../../tests/assert.ts";
import { listHostNetns } from "./veths.ts";

Deno.test("veth pairing: namespaces are listed once each, ours first as null", () => {
  const spaces = listHostNetns();
  assertEquals(spaces[0].label, null);
  assertEquals(new Set(spaces.map((s) => s.id)).size, spaces.length);
});
