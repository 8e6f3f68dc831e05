/**
 * Properties of the link message decoder (parseLink, what every `link show` answer goes through) and the
 * request writer it pairs with (MsgWriter): a link written as the kernel writes RTM_NEWLINK reads back as
 * that link; any bytes (mutated messages, junk) decode without a throw and without reading a byte outside
 * the message. No socket: messages are built in memory. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assertEquals } from "../../tests/assert.ts";
import { check, ipv4Addr, ipv6Addr, mutatedBytes } from "../../tests/prop.ts";
import { validateIfName } from "../cni/spec.ts";
import { MsgWriter } from "./codec/msg.ts";
import { formatIP, formatMac, linkFlagNames, operstateName } from "./codec/format.ts";
import {
  IFF_UP,
  IFLA_ADDRESS,
  IFLA_IFNAME,
  IFLA_INFO_DATA,
  IFLA_INFO_KIND,
  IFLA_LINK,
  IFLA_LINK_NETNSID,
  IFLA_LINKINFO,
  IFLA_MASTER,
  IFLA_MTU,
  IFLA_OPERSTATE,
  IFLA_VXLAN_GBP,
  IFLA_VXLAN_ID,
  IFLA_VXLAN_LEARNING,
  IFLA_VXLAN_LINK,
  IFLA_VXLAN_LOCAL,
  IFLA_VXLAN_LOCAL6,
  IFLA_VXLAN_PORT,
  RTM_NEWLINK,
} from "./codec/consts.ts";
import { parseLink } from "./linkmsg.ts";
import type { LinkInfo } from "./types.ts";

/** Interface names the CNI spec and the kernel take (any UTF-8, 15 bytes; NUL aside: C ends the name there). */
const ifName = fc.oneof(
  fc.stringMatching(/^[a-z][a-z0-9_.-]{0,14}$/),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 15 }),
).filter((s) => {
  if (s.includes("\0")) return false;
  try {
    validateIfName(s);
    return true;
  } catch {
    return false;
  }
});

const int32 = fc.integer({ min: -0x80000000, max: 0x7fffffff });
const u32 = fc.integer({ min: 0, max: 0xffffffff });

/** A link as the kernel describes it: the ifinfomsg and the attributes flanctl reads. */
const linkArb = fc.record({
  index: int32,
  flags: u32,
  name: ifName,
  mtu: fc.option(u32),
  mac: fc.option(fc.uint8Array({ minLength: 1, maxLength: 32 }).filter((b) => ![4, 16].includes(b.length))),
  master: fc.option(int32),
  parent: fc.option(int32),
  operstate: fc.option(fc.integer({ min: 0, max: 255 })),
  netnsid: fc.option(int32),
  kind: fc.option(
    fc.oneof(fc.constantFrom("vxlan", "bridge", "veth", "dummy"), fc.stringMatching(/^[a-z]{1,12}$/)),
  ),
  vxlan: fc.option(fc.record({
    vni: u32,
    port: fc.integer({ min: 0, max: 0xffff }),
    dev: fc.option(u32),
    local: fc.option(fc.oneof(ipv4Addr, ipv6Addr)),
    learning: fc.option(fc.integer({ min: 0, max: 255 })),
    gbp: fc.boolean(),
  })),
});
type LinkArb = typeof linkArb extends fc.Arbitrary<infer T> ? T : never;

/** The RTM_NEWLINK message of `l` (nlmsghdr, ifinfomsg, attributes), as bytes. */
function encode(l: LinkArb): Uint8Array {
  const w = new MsgWriter(64);
  const h = w.begin(RTM_NEWLINK, 0, 1, 16);
  w.dv.setInt32(h + 4, l.index, true);
  w.dv.setUint32(h + 8, l.flags, true);
  w.str(IFLA_IFNAME, l.name);
  if (l.mtu !== null) w.u32(IFLA_MTU, l.mtu);
  if (l.mac !== null) w.bytes(IFLA_ADDRESS, l.mac);
  if (l.master !== null) w.u32(IFLA_MASTER, l.master);
  if (l.parent !== null) w.u32(IFLA_LINK, l.parent);
  if (l.operstate !== null) w.u8(IFLA_OPERSTATE, l.operstate);
  if (l.netnsid !== null) w.u32(IFLA_LINK_NETNSID, l.netnsid);
  if (l.kind !== null) {
    w.nest(IFLA_LINKINFO);
    w.str(IFLA_INFO_KIND, l.kind);
    if (l.vxlan) {
      const x = l.vxlan;
      w.nest(IFLA_INFO_DATA);
      w.u32(IFLA_VXLAN_ID, x.vni);
      w.bytes(IFLA_VXLAN_PORT, new Uint8Array([x.port >> 8, x.port & 0xff])); // network order
      if (x.dev !== null) w.u32(IFLA_VXLAN_LINK, x.dev);
      if (x.local) w.bytes(x.local.family === 4 ? IFLA_VXLAN_LOCAL : IFLA_VXLAN_LOCAL6, x.local.toBytes());
      if (x.learning !== null) w.u8(IFLA_VXLAN_LEARNING, x.learning);
      if (x.gbp) w.bytes(IFLA_VXLAN_GBP, new Uint8Array(0));
      w.nestEnd();
    }
    w.nestEnd();
  }
  w.end();
  return w.slice().slice();
}

/** What parseLink should make of `l`. */
function expected(l: LinkArb): LinkInfo {
  const info: LinkInfo = {
    index: l.index,
    name: l.name,
    kind: l.kind,
    flags: linkFlagNames(l.flags),
    up: (l.flags & IFF_UP) !== 0,
    operstate: operstateName(l.operstate ?? 0),
    mtu: l.mtu ?? 0,
    mac: l.mac ? formatMac(l.mac) : null,
    master: l.master !== null && l.master > 0 ? l.master : null,
    parent: l.parent !== null && l.parent > 0 ? l.parent : null,
    linkNetnsId: l.netnsid,
  };
  if (l.kind === "vxlan") {
    const x = l.vxlan;
    info.vxlan = {
      vni: x?.vni ?? 0,
      port: x?.port ?? 0,
      local: x?.local ? formatIP(x.local.toBytes()) : null, // as iproute2 prints it (inet_ntop)
      dev: x?.dev || null,
      learning: (x?.learning ?? 0) > 0,
      gbp: x?.gbp ?? false,
    };
  }
  return info;
}

/** parseLink of the message body in `msg` (after its 16-byte nlmsghdr). */
function decode(msg: Uint8Array): LinkInfo | null {
  return parseLink(msg, new DataView(msg.buffer, msg.byteOffset, msg.length), 16, msg.length - 16);
}

Deno.test("link messages (property): a link written as RTM_NEWLINK reads back as that link", () => {
  check(
    fc.property(linkArb, (l) => {
      const msg = encode(l);
      assertEquals(new DataView(msg.buffer).getUint32(0, true), msg.length, "nlmsg_len");
      assertEquals(decode(msg), expected(l));
    }),
    800,
  );
});

Deno.test("link messages (property): any bytes decode without a throw, reading nothing past the message", () => {
  // Any body, also one shorter than the 16-byte ifinfomsg (no link: null), which the kernel never sends.
  const body = fc.oneof(
    mutatedBytes(linkArb.map(encode)).map((m) => m.subarray(16)),
    fc.uint8Array({ maxLength: 120 }),
    fc.uint8Array({ maxLength: 15 }),
  );
  check(
    fc.property(body, fc.uint8Array({ minLength: 1, maxLength: 64 }), (b, after) => {
      const alone = new Uint8Array(b);
      const a = parseLink(alone, new DataView(alone.buffer), 0, alone.length);
      assertEquals(a === null, b.length < 16, `a ${b.length}-byte body`);
      // The same message with other bytes after it (the dump's next message): the same link.
      const inDump = new Uint8Array([...b, ...after]);
      assertEquals(parseLink(inDump, new DataView(inDump.buffer), 0, b.length), a);
    }),
    800,
  );
});
