/**
 * The kernel WireGuard's generic netlink messages against bytes computed by hand from the layout of
 * include/uapi/linux/wireguard.h (no module on this machine: these tests are the kernel path's proof).
 */
import { assertEquals, assertThrows } from "../../../tests/assert.ts";
import { MsgWriter } from "./msg.ts";
import {
  familyIdOf,
  parseGetDevice,
  putGetDevice,
  putGetFamily,
  putSetDevice,
  sockaddrOf,
  WgNetlinkError,
} from "./wgmsg.ts";

const rep = (b: number, n = 32): number[] => new Array(n).fill(b);
const key = (b: number): Uint8Array => new Uint8Array(32).fill(b);
const FAM = 27;

function bytesOf(f: (w: MsgWriter) => void): number[] {
  const w = new MsgWriter(64);
  f(w);
  return [...w.slice()];
}

Deno.test("wgmsg: CTRL_CMD_GETFAMILY for wireguard, byte for byte", () => {
  assertEquals(bytesOf((w) => putGetFamily(w, 7)), [
    36,
    0,
    0,
    0,
    0x10,
    0,
    5,
    0,
    7,
    0,
    0,
    0,
    0,
    0,
    0,
    0, // nlmsghdr: GENL_ID_CTRL, REQUEST|ACK
    3,
    1,
    0,
    0, // genlmsghdr: CTRL_CMD_GETFAMILY v1
    14,
    0,
    2,
    0,
    ...new TextEncoder().encode("wireguard"),
    0,
    0,
    0, // CTRL_ATTR_FAMILY_NAME + NUL + pad
  ]);
});

Deno.test("wgmsg: the family id of a GETFAMILY reply; an error reply throws its errno", () => {
  const reply = new Uint8Array([
    ...[36, 0, 0, 0, 0x10, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0],
    ...[1, 2, 0, 0],
    ...[14, 0, 2, 0, ...new TextEncoder().encode("wireguard"), 0, 0, 0],
  ]);
  assertEquals(familyIdOf(reply), null);
  const withId = new Uint8Array([...reply, 6, 0, 1, 0, 27, 0, 0, 0]);
  withId[0] = 44;
  assertEquals(familyIdOf(withId), 27);
  // ENOENT: the kernel has no "wireguard" family.
  const err = new Uint8Array([
    20 + 16,
    0,
    0,
    0,
    2,
    0,
    0,
    0,
    7,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0xfe,
    0xff,
    0xff,
    0xff,
    ...rep(0, 16),
  ]);
  const e = assertThrows(() => familyIdOf(err), WgNetlinkError);
  assertEquals((e as WgNetlinkError).errno, 2);
});

Deno.test("wgmsg: GET_DEVICE dump request, byte for byte", () => {
  assertEquals(bytesOf((w) => putGetDevice(w, FAM, 2, "wg0")), [
    28,
    0,
    0,
    0,
    FAM,
    0,
    0x05,
    0x03,
    2,
    0,
    0,
    0,
    0,
    0,
    0,
    0, // REQUEST|ACK|DUMP
    0,
    1,
    0,
    0, // WG_CMD_GET_DEVICE v1
    8,
    0,
    2,
    0,
    0x77,
    0x67,
    0x30,
    0, // WGDEVICE_A_IFNAME "wg0"
  ]);
  assertThrows(() => bytesOf((w) => putGetDevice(w, FAM, 2, "a/b")), WgNetlinkError);
});

Deno.test("wgmsg: SET_DEVICE with key, port, replace, peers (v4+v6 endpoints, allowed IPs, remove)", () => {
  const got = bytesOf((w) =>
    putSetDevice(w, FAM, 9, {
      ifname: "wg0",
      privateKey: key(0x11),
      listenPort: 51820,
      replacePeers: true,
      peers: [
        {
          publicKey: key(0x22),
          presharedKey: key(0x33),
          endpoint: "192.0.2.1:51820",
          keepalive: 25,
          allowedIPs: ["10.244.1.0/24"],
        },
        { publicKey: key(0x44), endpoint: "[2001:db8::1]:51821", allowedIPs: ["fd00:1::/64"] },
        { publicKey: key(0x55), remove: true, endpoint: "192.0.2.9:1" },
      ],
    })
  );
  const want = [
    0x90,
    0x01,
    0,
    0,
    FAM,
    0,
    5,
    0,
    9,
    0,
    0,
    0,
    0,
    0,
    0,
    0, // 400 bytes, REQUEST|ACK
    1,
    1,
    0,
    0, // WG_CMD_SET_DEVICE v1
    8,
    0,
    2,
    0,
    0x77,
    0x67,
    0x30,
    0, // IFNAME
    36,
    0,
    3,
    0,
    ...rep(0x11), // PRIVATE_KEY
    6,
    0,
    6,
    0,
    0x6c,
    0xca,
    0,
    0, // LISTEN_PORT 51820 (u16, host order)
    8,
    0,
    5,
    0,
    1,
    0,
    0,
    0, // FLAGS = REPLACE_PEERS
    0x40,
    0x01,
    0x08,
    0x80, // PEERS (320, nested)
    // peer 1 (144)
    0x90,
    0,
    0x00,
    0x80,
    36,
    0,
    1,
    0,
    ...rep(0x22), // PUBLIC_KEY
    8,
    0,
    3,
    0,
    2,
    0,
    0,
    0, // FLAGS = REPLACE_ALLOWEDIPS
    36,
    0,
    2,
    0,
    ...rep(0x33), // PRESHARED_KEY
    20,
    0,
    4,
    0,
    2,
    0,
    0xca,
    0x6c,
    192,
    0,
    2,
    1,
    ...rep(0, 8), // ENDPOINT sockaddr_in, port big-endian
    6,
    0,
    5,
    0,
    25,
    0,
    0,
    0, // PERSISTENT_KEEPALIVE_INTERVAL
    32,
    0,
    0x09,
    0x80, // ALLOWEDIPS
    28,
    0,
    0x00,
    0x80,
    6,
    0,
    1,
    0,
    2,
    0,
    0,
    0, // FAMILY AF_INET
    8,
    0,
    2,
    0,
    10,
    244,
    1,
    0, // IPADDR
    5,
    0,
    3,
    0,
    24,
    0,
    0,
    0, // CIDR_MASK
    // peer 2 (124)
    0x7c,
    0,
    0x00,
    0x80,
    36,
    0,
    1,
    0,
    ...rep(0x44),
    8,
    0,
    3,
    0,
    2,
    0,
    0,
    0,
    32,
    0,
    4,
    0,
    10,
    0,
    0xca,
    0x6d,
    0,
    0,
    0,
    0, // sockaddr_in6: family, port, flowinfo
    0x20,
    0x01,
    0x0d,
    0xb8,
    ...rep(0, 11),
    1,
    0,
    0,
    0,
    0, // address, scope id
    44,
    0,
    0x09,
    0x80,
    40,
    0,
    0x00,
    0x80,
    6,
    0,
    1,
    0,
    10,
    0,
    0,
    0, // AF_INET6
    20,
    0,
    2,
    0,
    0xfd,
    0,
    0,
    1,
    ...rep(0, 12),
    5,
    0,
    3,
    0,
    64,
    0,
    0,
    0,
    // peer 3 (48): removed, nothing else sent
    0x30,
    0,
    0x00,
    0x80,
    36,
    0,
    1,
    0,
    ...rep(0x55),
    8,
    0,
    3,
    0,
    1,
    0,
    0,
    0, // FLAGS = REMOVE_ME
  ];
  assertEquals(want.length, 400);
  assertEquals(got, want);
});

Deno.test("wgmsg: SET_DEVICE refuses bad values before writing anything", () => {
  const w = new MsgWriter(64);
  const bad = [
    { ifname: "wg0", privateKey: new Uint8Array(31) },
    { ifname: "wg0", listenPort: 65536 },
    { ifname: "wg0", peers: [{ publicKey: key(1), endpoint: "192.0.2.1" }] },
    { ifname: "wg0", peers: [{ publicKey: key(1), endpoint: "[192.0.2.1]:5" }] },
    { ifname: "wg0", peers: [{ publicKey: key(1), allowedIPs: ["10.0.0.0/33"] }] },
    { ifname: "wg0", peers: [{ publicKey: key(1), keepalive: -1 }] },
    { ifname: "0123456789abcdef" },
  ];
  for (const c of bad) assertThrows(() => putSetDevice(w, FAM, 1, c), WgNetlinkError);
  assertEquals(w.len, 0);
  assertEquals([...sockaddrOf("[::ffff:1.2.3.4]:1").subarray(0, 4)], [10, 0, 0, 1]);
});

// A GET_DEVICE dump reply built from the header's layout (independent of MsgWriter).
const u16 = (n: number) => [n & 0xff, n >> 8];
const u32 = (n: number) => [n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24];
function attr(type: number, v: number[]): number[] {
  const out = [...u16(4 + v.length), ...u16(type), ...v];
  while (out.length % 4) out.push(0);
  return out;
}
const nest = (type: number, ...parts: number[][]) => attr(type | 0x8000, parts.flat());
function msg(type: number, body: number[]): number[] {
  return [...u32(16 + body.length), ...u16(type), ...u16(2), ...u32(3), ...u32(0), ...body];
}
const DONE = msg(3, u32(0));
const ip4 = (a: number[], m: number) => nest(0, attr(1, u16(2)), attr(2, a), attr(3, [m]));

function reply(): Uint8Array {
  const dev = [attr(1, u32(5)), attr(2, [0x77, 0x67, 0x30, 0])];
  const m1 = msg(FAM, [
    0,
    1,
    0,
    0,
    ...dev.flat(),
    ...attr(3, rep(0x11)),
    ...attr(4, rep(0x66)),
    ...attr(6, u16(51820)),
    ...attr(7, u32(0)),
    ...nest(
      8,
      nest(
        0,
        attr(1, rep(0x22)),
        attr(2, rep(0x33)),
        attr(4, [2, 0, 0xca, 0x6c, 192, 0, 2, 1, ...rep(0, 8)]),
        attr(5, u16(25)),
        attr(6, [...u32(1_700_000_000), ...u32(0), ...rep(0, 8)]),
        attr(7, [...u32(1000), ...u32(0)]),
        attr(8, [...u32(2000), ...u32(0)]),
        nest(9, ip4([10, 244, 1, 0], 24)),
      ),
    ),
  ]);
  // The second message continues peer 1 (more allowed IPs) and adds peer 2 (IPv6 endpoint and net).
  const m2 = msg(FAM, [
    0,
    1,
    0,
    0,
    ...dev.flat(),
    ...nest(
      8,
      nest(0, attr(1, rep(0x22)), nest(9, ip4([10, 244, 9, 0], 24))),
      nest(
        0,
        attr(1, rep(0x44)),
        attr(4, [10, 0, 0xca, 0x6d, 0, 0, 0, 0, 0x20, 0x01, 0x0d, 0xb8, ...rep(0, 11), 1, 0, 0, 0, 0]),
        nest(9, nest(0, attr(1, u16(10)), attr(2, [0xfd, 0, 0, 1, ...rep(0, 12)]), attr(3, [64]))),
      ),
    ),
  ]);
  return new Uint8Array([...m1, ...m2, ...DONE]);
}

Deno.test("wgmsg: a GET_DEVICE dump reply decodes; its secret keys are zeroed where they lay", () => {
  const b = reply();
  const d = parseGetDevice(b, FAM);
  assertEquals(d.ifindex, 5);
  assertEquals(d.ifname, "wg0");
  assertEquals(d.privateKey, true);
  assertEquals(d.publicKey, key(0x66));
  assertEquals(d.listenPort, 51820);
  assertEquals(d.peers, [
    {
      publicKey: key(0x22),
      presharedKey: true,
      endpoint: "192.0.2.1:51820",
      lastHandshake: 1_700_000_000,
      rxBytes: 1000,
      txBytes: 2000,
      keepalive: 25,
      allowedIPs: ["10.244.1.0/24", "10.244.9.0/24"],
    },
    {
      publicKey: key(0x44),
      presharedKey: false,
      endpoint: "[2001:db8::1]:51821",
      lastHandshake: 0,
      rxBytes: 0,
      txBytes: 0,
      keepalive: 0,
      allowedIPs: ["fd00:1::/64"],
    },
  ]);
  const text = [...b].join(",");
  assertEquals(text.includes(rep(0x11).join(",")), false);
  assertEquals(text.includes(rep(0x33).join(",")), false);
});

Deno.test("wgmsg: a hostile GET_DEVICE reply is refused, never read past", () => {
  const good = reply();
  const cases: Array<[string, (b: Uint8Array) => Uint8Array]> = [
    ["message length past the buffer", (b) => (b[0] = 0xff, b[1] = 0xff, b)],
    ["message length under a header", (b) => (b[0] = 8, b[1] = 0, b)],
    ["truncated", (b) => b.subarray(0, b.length - 30)],
    ["no DONE", (b) => b.subarray(0, b.length - 20)],
    [
      "trailing bytes",
      (b) =>
        new Uint8Array([
          ...b.subarray(0, b.length - 20),
          1,
          2,
          3,
          4,
          5,
          6,
          7,
          8,
          9,
          10,
          11,
          12,
          13,
          14,
          15,
          16,
          17,
        ]),
    ],
  ];
  for (const [what, f] of cases) {
    assertThrows(() => parseGetDevice(f(good.slice()), FAM), WgNetlinkError, undefined);
    void what;
  }
  // An attribute inside the peers nest whose length runs past the nest.
  const peersAt = (b: Uint8Array) => {
    for (let i = 20; i < b.length - 4; i += 4) if (b[i + 2] === 8 && b[i + 3] === 0x80) return i;
    throw new Error("no peers nest");
  };
  const b1 = good.slice();
  const p = peersAt(b1);
  b1[p + 4] = 0xf0; // the first peer's nest length: 240, past PEERS
  assertThrows(() => parseGetDevice(b1, FAM), WgNetlinkError);
  // A peer public key of 31 bytes.
  const b2 = good.slice();
  b2[peersAt(b2) + 8] = 35;
  assertThrows(() => parseGetDevice(b2, FAM), WgNetlinkError);
  // Another family's message, and the kernel's error (ENODEV) with its errno.
  assertThrows(() => parseGetDevice(good.slice(), FAM + 1), WgNetlinkError);
  const err = new Uint8Array(msg(2, [0xed, 0xff, 0xff, 0xff, ...rep(0, 16)]));
  assertEquals((assertThrows(() => parseGetDevice(err, FAM), WgNetlinkError) as WgNetlinkError).errno, 19);
});

Deno.test("wgmsg: SET_DEVICE refuses peers over one attribute's 65535 bytes, leaving the writer as it was", () => {
  const w = new MsgWriter(64);
  const peer = (i: number) => ({
    publicKey: new Uint8Array(32).fill(i & 0xff),
    presharedKey: new Uint8Array(32),
    endpoint: "[2001:db8::1]:51820",
    keepalive: 25,
    allowedIPs: [`10.${i >> 8}.${i & 0xff}.0/24`],
  });
  // 156 bytes a peer (an IPv6 endpoint, one IPv4 allowed IP), 4 of the nest: 420 fit, 421 do not.
  putSetDevice(w, 0x1c, 1, { ifname: "flannel-wg", peers: Array.from({ length: 420 }, (_, i) => peer(i)) });
  const len = w.len;
  assertThrows(
    () =>
      putSetDevice(w, 0x1c, 2, {
        ifname: "flannel-wg",
        peers: Array.from({ length: 421 }, (_, i) => peer(i)),
      }),
    WgNetlinkError,
    "over one attribute's 65535",
  );
  assertEquals(w.len, len);
});
