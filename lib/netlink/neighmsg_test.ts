/** The neighbour message reader on short messages (found by neighmsg_prop_test.ts). */
import { assertEquals } from "../../tests/assert.ts";
import { newNeighMsg, readNeighMsg } from "./neighmsg.ts";

Deno.test("neighbour messages: a body shorter than struct ndmsg is no entry", () => {
  // The shrunk counterexample: an empty body at the end of a datagram made the scans throw a RangeError
  // (the DataView ends with the datagram); inside a datagram, the next message's bytes were read instead.
  const empty = new Uint8Array(0);
  assertEquals(readNeighMsg(empty, new DataView(empty.buffer), 0, 0, newNeighMsg()), false);
  const dump = new Uint8Array(64).fill(7); // an 11-byte body, then the next message
  const m = newNeighMsg();
  assertEquals(readNeighMsg(dump, new DataView(dump.buffer), 0, 11, m), false);
  assertEquals(m, newNeighMsg());
});
