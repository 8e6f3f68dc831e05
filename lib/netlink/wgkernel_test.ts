/**
 * The generic netlink socket against this machine's kernel (read-only family lookups: no privilege, no
 * change anywhere). The kernel here has no WireGuard module, so "wireguard" resolves to none. The reply
 * handling of GET_DEVICE (keys zeroed) runs over a fake socket.
 */
import { assert, assertEquals, assertThrows } from "../../tests/assert.ts";
import { holds, recordingArrays } from "../../tests/arrays_made.ts";
import { GENL_ID_CTRL, type WgDeviceConfig, WgNetlinkError } from "./codec/wgmsg.ts";
import { genlFamilyId, type GenlIo, wgGetDeviceOver, wgSetDeviceOver } from "./wgkernel.ts";

Deno.test("wgkernel: the generic netlink controller resolves itself (the socket and codec work)", () => {
  assertEquals(genlFamilyId("nlctrl"), GENL_ID_CTRL);
});

Deno.test("wgkernel: a family the kernel lacks resolves to null (ENOENT), not an error", () => {
  assertEquals(genlFamilyId("flanctl-none"), null);
  const wg = genlFamilyId();
  // Asked as root, the kernel may load the module first: look after the lookup.
  let loaded = false;
  try {
    Deno.statSync("/sys/module/wireguard");
    loaded = true;
  } catch { /* not loaded */ }
  assertEquals(wg !== null, loaded, "the wireguard family exists exactly when the module is loaded");
});

// A GET_DEVICE dump built from the uapi layout (independent of MsgWriter), served by a fake socket.
const FAM = 0x1c;
const u16 = (n: number) => [n & 0xff, n >> 8];
const u32 = (n: number) => [n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24];
function attr(type: number, v: number[]): number[] {
  const out = [...u16(4 + v.length), ...u16(type), ...v];
  while (out.length % 4) out.push(0);
  return out;
}
const nest = (type: number, ...parts: number[][]) => attr(type | 0x8000, parts.flat());
const msg = (
  type: number,
  body: number[],
) => [...u32(16 + body.length), ...u16(type), ...u16(2), ...u32(1), ...u32(0), ...body];
const PRIV = 0xa5, PSK = 0xc3;
const key = (b: number) => new Array<number>(32).fill(b);

/** Datagrams of a dump: the device (with its private key), then `peers` messages of one peer each (PSK set). */
function dump(peers: number, tail: number[] = msg(3, u32(0))): number[][] {
  const dev = [...attr(2, [0x77, 0x67, 0x30, 0]), ...attr(3, key(PRIV)), ...attr(6, u16(51820))];
  const msgs = [msg(FAM, [0, 1, 0, 0, ...dev])];
  for (let i = 0; i < peers; i++) {
    const pub = [i & 0xff, i >> 8, ...key(7).slice(2)];
    msgs.push(
      msg(FAM, [
        0,
        1,
        0,
        0,
        ...attr(2, [0x77, 0x67, 0x30, 0]),
        ...nest(8, nest(0, attr(1, pub), attr(2, key(PSK)))),
      ]),
    );
  }
  msgs.push(tail);
  const grams: number[][] = [];
  for (let i = 0; i < msgs.length; i += 40) grams.push(msgs.slice(i, i + 40).flat());
  return grams;
}

/** A socket that answers any request with `grams` (then `after` for each further recv), recording every buffer it filled. */
function fakeIo(grams: number[][], after = 0): { io: GenlIo; filled: ArrayBuffer[] } {
  const filled: ArrayBuffer[] = [];
  let i = 0;
  const io: GenlIo = {
    send: (b) => b.length,
    recv: (b) => {
      if (i >= grams.length) return after;
      const g = grams[i++];
      b.set(g);
      filled.push(b.buffer);
      return g.length;
    },
  };
  return { io, filled };
}

const clean = (bufs: ArrayBuffer[]) => bufs.every((b) => new Uint8Array(b).every((x) => x === 0));

Deno.test("wgkernel: every buffer that held a GET_DEVICE reply is zero once it is read", () => {
  const { io, filled } = fakeIo(dump(1200));
  const d = wgGetDeviceOver(io, FAM, "wg0");
  assertEquals([d.privateKey, d.peers.length, d.peers.every((p) => p.presharedKey)], [true, 1200, true]);
  assert(new Set(filled).size > 1, "the reply outgrew the first buffer");
  assert(clean(filled), "a buffer still holds reply bytes");
});

Deno.test("wgkernel: a GET_DEVICE reply that does not parse is zeroed too", () => {
  // A message of another family before NLMSG_DONE: the parser throws after reading the keys.
  const { io, filled } = fakeIo(dump(900, [...msg(FAM + 1, [0, 1, 0, 0]), ...msg(3, u32(0))]));
  assertThrows(() => wgGetDeviceOver(io, FAM, "wg0"), WgNetlinkError, "not the wireguard family");
  assert(clean(filled), "a buffer still holds reply bytes");
});

Deno.test("wgkernel: a GET_DEVICE reply cut short (the socket errs) is zeroed", () => {
  const grams = dump(900);
  const { io, filled } = fakeIo(grams.slice(0, -1), -4);
  assertThrows(() => wgGetDeviceOver(io, FAM, "wg0"), WgNetlinkError, "recv: errno 4");
  assert(filled.length > 1 && clean(filled), "a buffer still holds reply bytes");
});

function setConfig(peers: number): WgDeviceConfig {
  return {
    ifname: "wg0",
    privateKey: new Uint8Array(32).fill(PRIV),
    listenPort: 51820,
    replacePeers: true,
    peers: Array.from({ length: peers }, (_, i) => ({
      publicKey: new Uint8Array(32).fill(7).fill(i & 0xff, 0, 1).fill(i >> 8, 1, 2),
      presharedKey: new Uint8Array(32).fill(PSK),
      endpoint: `10.0.${i >> 8}.${i & 255}:51820`,
      keepalive: 25,
      allowedIPs: [`10.244.${i & 255}.0/24`, `fd00:${i}::/64`],
    })),
  };
}

/** A socket that acks any request (errno 0), recording the requests' lengths. */
function ackIo(sent: number[]): GenlIo {
  return {
    send: (b) => (sent.push(b.length), b.length),
    recv: (b) => {
      const ack = msg(2, [...u32(0), ...new Array(16).fill(0)]);
      b.set(ack);
      return ack.length;
    },
  };
}

Deno.test("wgkernel: a SET_DEVICE of 200 peers leaves its keys in no buffer, outgrown ones included", () => {
  const sent: number[] = [], c = setConfig(200);
  const bufs = recordingArrays(() => wgSetDeviceOver(ackIo(sent), FAM, c));
  assert(
    sent.length === 1 && sent[0] > 4096 * 4,
    `one request that outgrew the writer's first buffers: ${sent}`,
  );
  assertEquals([...bufs].filter((b) => holds(b, PRIV) || holds(b, PSK)).map((b) => b.byteLength), []);
});

Deno.test("wgkernel: a SET_DEVICE refused for size (peers over 65535 bytes) leaves its keys in no buffer", () => {
  const sent: number[] = [], c = setConfig(400);
  let err: unknown = null;
  const bufs = recordingArrays(() => {
    try {
      wgSetDeviceOver(ackIo(sent), FAM, c);
    } catch (e) {
      err = e;
    }
  });
  assert(err instanceof WgNetlinkError && err.message.includes("send fewer per request"), String(err));
  assertEquals(sent, []);
  assertEquals([...bufs].filter((b) => holds(b, PRIV) || holds(b, PSK)).map((b) => b.byteLength), []);
});
