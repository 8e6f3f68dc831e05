/**
 * Properties of the neighbour message reader (readNeighMsg: what the compact neighbour and FDB scans read
 * every RTM_NEWNEIGH with) against the request writers (putReplaceNeigh, putReplaceFdb): an entry written
 * reads back as that entry; any bytes (mutated messages, junk) decode without a throw and without reading a
 * byte outside the message. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assertEquals } from "../../tests/assert.ts";
import { check, ipv4Addr, ipv6Addr, mutatedBytes } from "../../tests/prop.ts";
import { MsgWriter } from "./codec/msg.ts";
import { putReplaceFdb, putReplaceNeigh } from "./codec/encode.ts";
import { formatIP, formatMac } from "./codec/format.ts";
import {
  AF_BRIDGE,
  AF_INET,
  AF_INET6,
  NTF_SELF,
  NUD_NOARP,
  NUD_PERMANENT,
  NUD_REACHABLE,
} from "./codec/consts.ts";
import { type NeighMsg, newNeighMsg, readNeighMsg } from "./neighmsg.ts";
import type { FdbSpec, NeighSpec } from "./types.ts";

/** A neighbour or FDB entry as the reconciler writes one (an IP of either family, a MAC, a device). */
const entry = fc.record({
  fdb: fc.boolean(),
  ifindex: fc.integer({ min: 1, max: 0x7fffffff }),
  ip: fc.oneof(ipv4Addr, ipv6Addr),
  mac: fc.uint8Array({ minLength: 6, maxLength: 6 }),
  state: fc.constantFrom("permanent", "reachable", "noarp") as fc.Arbitrary<NeighSpec["state"]>,
});
type Entry = typeof entry extends fc.Arbitrary<infer T> ? T : never;

/** The RTM_NEWNEIGH bytes the writers produce for `e` (nlmsghdr included). */
function encode(e: Entry): Uint8Array {
  const w = new MsgWriter(64);
  const spec = {
    dev: e.ifindex,
    dst: String(e.ip),
    mac: formatMac(e.mac),
    lladdr: formatMac(e.mac),
    state: e.state,
  };
  if (e.fdb) putReplaceFdb(w, spec as unknown as FdbSpec, (r) => Number(r), 1, 0);
  else putReplaceNeigh(w, spec as unknown as NeighSpec, (r) => Number(r), 1, 0);
  return w.slice().slice();
}

function read(b: Uint8Array, off: number, len: number): NeighMsg | null {
  const m = newNeighMsg();
  return readNeighMsg(b, new DataView(b.buffer, b.byteOffset, b.length), off, len, m) ? m : null;
}

Deno.test("neighbour messages (property): an entry the writers write reads back as that entry", () => {
  check(
    fc.property(entry, (e) => {
      const b = encode(e);
      const nud =
        { permanent: NUD_PERMANENT, reachable: NUD_REACHABLE, noarp: NUD_NOARP }[e.state ?? "permanent"];
      assertEquals(read(b, 16, b.length - 16), {
        family: e.fdb ? AF_BRIDGE : e.ip.family === 4 ? AF_INET : AF_INET6,
        ifindex: e.ifindex,
        state: e.fdb ? NUD_PERMANENT : nud,
        flags: e.fdb ? NTF_SELF : 0,
        dst: formatIP(e.ip.toBytes()),
        lladdr: formatMac(e.mac),
      });
    }),
    500,
  );
});

Deno.test("neighbour messages (property): any bytes decode without a throw, reading nothing past the message", () => {
  const body = fc.oneof(
    mutatedBytes(entry.map(encode)).map((b) => b.subarray(16)),
    fc.uint8Array({ maxLength: 80 }),
  );
  check(
    fc.property(body, fc.uint8Array({ minLength: 1, maxLength: 32 }), (b, after) => {
      const alone = new Uint8Array(b);
      const r = read(alone, 0, alone.length);
      assertEquals(read(new Uint8Array([...b, ...after]), 0, b.length), r);
    }),
    600,
  );
});
