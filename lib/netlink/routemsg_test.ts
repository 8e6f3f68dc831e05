import { assertEquals } from "../../tests/assert.ts";
import { eachNexthop, newRouteMsg, readRouteMsg, routeDst } from "./routemsg.ts";

const RTA_DST = 1, RTA_OIF = 4, RTA_GATEWAY = 5, RTA_PRIORITY = 6, RTA_MULTIPATH = 9, RTA_TABLE = 15;
const u32 = (v: number) => [v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >>> 24];
const attr = (type: number, value: number[]): number[] => {
  const a = [...u16(4 + value.length), ...u16(type), ...value];
  while (a.length % 4) a.push(0);
  return a;
};
const u16 = (v: number) => [v & 0xff, v >> 8];
/** struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags. */
const rtmsg = (dstLen: number, type = 1, flags = 0) => [2, dstLen, 0, 0, 254, 3, 0, type, ...u32(flags)];
const hop = (flags: number, ifindex: number, gw: number[]) => {
  const attrs = attr(RTA_GATEWAY, gw);
  return [...u16(8 + attrs.length), flags, 0, ...u32(ifindex), ...attrs];
};

function read(bytes: number[], len = bytes.length) {
  const b = new Uint8Array(bytes), dv = new DataView(b.buffer), m = newRouteMsg();
  const ok = readRouteMsg(b, dv, 0, len, m);
  const hops: [string | null, number, number][] = [];
  if (ok) eachNexthop(b, dv, m, (gw, ifindex, flags) => hops.push([gw, ifindex, flags]));
  return { ok, m, hops, dst: ok ? routeDst(m) : null };
}

Deno.test("readRouteMsg: a route with one next hop, its table from RTA_TABLE", () => {
  const r = read([
    ...rtmsg(24, 1, 0x4),
    ...attr(RTA_TABLE, u32(1000)),
    ...attr(RTA_DST, [10, 244, 1, 0]),
    ...attr(RTA_GATEWAY, [10, 0, 0, 2]),
    ...attr(RTA_OIF, u32(3)),
    ...attr(RTA_PRIORITY, u32(100)),
  ]);
  assertEquals(r.ok, true);
  assertEquals(r.dst, "10.244.1.0/24");
  const { family, table, protocol, type, flags, gateway, oif, metric, single, mpOff } = r.m;
  assertEquals(
    { family, table, protocol, type, flags, gateway, oif, metric, single, mpOff },
    {
      family: 4,
      table: 1000,
      protocol: 3,
      type: 1,
      flags: 4,
      gateway: "10.0.0.2",
      oif: 3,
      metric: 100,
      single: true,
      mpOff: -1,
    },
  );
  assertEquals(r.hops, []);
});

Deno.test("readRouteMsg: default and blackhole routes; a family other than IPv4/IPv6 is refused", () => {
  const d = read([...rtmsg(0), ...attr(RTA_GATEWAY, [10, 0, 0, 1])]);
  assertEquals([d.dst, d.m.gateway, d.m.single], ["default", "10.0.0.1", true]);
  const bh = read([...rtmsg(24, 6), ...attr(RTA_DST, [10, 244, 2, 0])]);
  assertEquals([bh.dst, bh.m.single, bh.m.gateway, bh.m.oif, bh.m.metric], [
    "10.244.2.0/24",
    false,
    null,
    null,
    null,
  ]);
  const bridge = [...rtmsg(24)];
  bridge[0] = 7;
  assertEquals(read(bridge).ok, false);
  assertEquals(read(rtmsg(24).slice(0, 8)).ok, false, "shorter than struct rtmsg");
});

Deno.test("eachNexthop: every next hop of RTA_MULTIPATH with its gateway, ifindex and flags", () => {
  const mp = [...hop(0, 3, [10, 0, 0, 2]), ...hop(0x4, 4, [10, 0, 1, 2])];
  const r = read([...rtmsg(24), ...attr(RTA_DST, [10, 100, 0, 0]), ...attr(RTA_MULTIPATH, mp)]);
  assertEquals(r.m.single, false);
  assertEquals(r.hops, [["10.0.0.2", 3, 0], ["10.0.1.2", 4, 4]]);
});

Deno.test("readRouteMsg: nothing past the message is read (the dump's next message follows it in the buffer)", () => {
  // RTA_GATEWAY's header fits in the message, its value does not: the old inline walks read the next
  // message's first bytes as the gateway.
  const msg = [...rtmsg(24), ...attr(RTA_DST, [10, 244, 1, 0]), ...u16(8), ...u16(RTA_GATEWAY)];
  const next = [10, 9, 9, 9, ...attr(RTA_OIF, u32(7))];
  const r = read([...msg, ...next], msg.length);
  assertEquals([r.dst, r.m.gateway, r.m.oif, r.m.single], ["10.244.1.0/24", null, null, false]);
  // A next hop longer than RTA_MULTIPATH (the second here) ends the next-hop walk.
  const mp = [...hop(0, 3, [10, 0, 0, 2]), ...hop(0, 4, [10, 0, 1, 2])];
  mp[mp.length / 2] = 200;
  assertEquals(read([...rtmsg(24), ...attr(RTA_MULTIPATH, mp)]).hops, [["10.0.0.2", 3, 0]]);
});
