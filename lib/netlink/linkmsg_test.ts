/** The link message decoder on short bodies (the property in linkmsg_prop_test.ts covers any bytes). */
import { assertEquals } from "../../tests/assert.ts";
import { parseLink } from "./linkmsg.ts";

Deno.test("link messages: a body shorter than struct ifinfomsg is no link", () => {
  // An empty body at the end of a datagram made the decoder throw a RangeError (the DataView ends there).
  const empty = new Uint8Array(0);
  assertEquals(parseLink(empty, new DataView(empty.buffer), 0, 0), null);
  // A 15-byte body inside a datagram: its ifindex and flags would have come from the next message's bytes.
  const dump = new Uint8Array(64).fill(7);
  assertEquals(parseLink(dump, new DataView(dump.buffer), 0, 15), null);
  // Exactly the header: a link with its fields and no attributes.
  assertEquals(parseLink(dump, new DataView(dump.buffer), 0, 16)?.index, 0x07070707);
});
