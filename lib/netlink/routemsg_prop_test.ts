/**
 * Properties of the route message reader (readRouteMsg, eachNexthop: what `routes()`, the compact route scan
 * and `routeGet` read every RTM_NEWROUTE with) against the request writer (putRoute): a route written reads
 * back as that route; next hops of a multipath route read back in order; any bytes (mutated messages, junk)
 * decode without a throw and without reading a byte outside the message. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../tests/assert.ts";
import { check, ipv4Addr, ipv4Net, ipv6Addr, ipv6Net, mutatedBytes } from "../../tests/prop.ts";
import { IPAddr } from "../base/cidr.ts";
import { MsgWriter } from "./codec/msg.ts";
import { putRoute } from "./codec/encode.ts";
import { formatIP, scopeValue } from "./codec/format.ts";
import { RTA_GATEWAY, RTA_MULTIPATH, RTA_TABLE, RTNH_F_ONLINK } from "./codec/consts.ts";
import { eachNexthop, newRouteMsg, readRouteMsg, routeDst, type RouteMsg } from "./routemsg.ts";
import type { RouteSpec } from "./types.ts";

/** Routes putRoute writes: a destination, a gateway of its family or none, a device, table, metric. */
const route = fc.oneof(
  fc.tuple(ipv4Net, fc.option(ipv4Addr), fc.option(ipv4Addr)),
  fc.tuple(ipv6Net, fc.option(ipv6Addr), fc.option(ipv6Addr)),
).chain(([dst, via, src]) =>
  fc.record({
    dst: fc.constant(String(dst)),
    via: fc.constant(via === null ? undefined : String(via)),
    src: fc.constant(src === null ? undefined : String(src)),
    dev: fc.option(fc.integer({ min: 1, max: 0x7fffffff }), { nil: undefined }),
    onlink: fc.boolean(),
    table: fc.oneof(fc.constantFrom(254, 255, 1000), fc.integer({ min: 0, max: 0xffffffff })),
    metric: fc.option(fc.integer({ min: 0, max: 0xffffffff }), { nil: undefined }),
    protocol: fc.integer({ min: 0, max: 255 }),
    scope: fc.constantFrom("universe", "link", "host") as fc.Arbitrary<RouteSpec["scope"]>,
    type: fc.constantFrom("unicast", "blackhole") as fc.Arbitrary<RouteSpec["type"]>,
  }, { requiredKeys: ["dst", "table", "protocol"] }).map((s) => s as unknown as RouteSpec)
);

/** The bytes of one RTM_NEWROUTE putRoute writes for `r` (nlmsghdr included). */
function encode(r: RouteSpec): Uint8Array {
  const w = new MsgWriter(64);
  putRoute(w, r, false, (ref) => Number(ref), 1, 0, () => "op");
  return w.slice().slice();
}

/** readRouteMsg of the message body in `b` (after its nlmsghdr), or null when it reads none. */
function read(b: Uint8Array, off = 16, len = b.length - off): RouteMsg | null {
  const m = newRouteMsg();
  return readRouteMsg(b, new DataView(b.buffer, b.byteOffset, b.length), off, len, m) ? m : null;
}

Deno.test("route messages (property): a route putRoute writes reads back as that route", () => {
  check(
    fc.property(route, (r) => {
      const m = read(encode(r));
      assert(m !== null, "a route message");
      const dst = r.dst as string;
      const [addr, len] = dst.split("/");
      assertEquals([m.family, m.dstLen], [addr.includes(":") ? 6 : 4, Number(len)]);
      assertEquals(routeDst(m), Number(len) === 0 ? "default" : `${formatIP(bytesOf(addr))}/${len}`);
      assertEquals(m.table, r.table);
      assertEquals([m.protocol, m.type], [r.protocol, r.type === "blackhole" ? 6 : 1]);
      assertEquals(m.gateway, r.via === undefined ? null : formatIP(bytesOf(r.via as string)));
      assertEquals(m.prefsrc, r.src === undefined ? null : formatIP(bytesOf(r.src as string)));
      assertEquals([m.oif, m.metric], [r.dev ?? null, r.metric ?? null]);
      assertEquals(m.single, r.via !== undefined || r.dev !== undefined);
      // Without a scope, putRoute picks iproute2's: universe with a gateway (or blackhole), else link.
      const scope = r.scope ?? (r.via !== undefined || r.type === "blackhole" ? "universe" : "link");
      assertEquals(m.scope, scopeValue(scope, "scope"));
      assertEquals(
        (m.flags & RTNH_F_ONLINK) !== 0,
        !!r.onlink && (r.dev !== undefined || r.via !== undefined),
      );
      assertEquals(m.mpOff, -1);
    }),
    600,
  );
});

/** Network-order bytes of an address's text. */
const bytesOf = (text: string) => IPAddr.parse(text).toBytes();

const hop = fc.record({
  gw: fc.option(ipv4Addr),
  ifindex: fc.integer({ min: -5, max: 0x7fffffff }),
  flags: fc.integer({ min: 0, max: 255 }),
});

Deno.test("route messages (property): the next hops of a multipath route read back in order", () => {
  check(
    fc.property(ipv4Net, fc.array(hop, { minLength: 1, maxLength: 5 }), (dst, hops) => {
      const w = new MsgWriter(64);
      const h = w.begin(24, 0, 1, 12);
      w.buf[h] = 2;
      w.buf[h + 1] = dst.prefix;
      w.u32(RTA_TABLE, 254);
      w.nest(RTA_MULTIPATH);
      for (const x of hops) {
        const at = w.raw(8);
        if (x.gw) w.bytes(RTA_GATEWAY, x.gw.toBytes());
        w.dv.setUint16(at, w.len - at, true);
        w.buf[at + 2] = x.flags;
        w.dv.setInt32(at + 4, x.ifindex, true);
      }
      w.nestEnd();
      w.end();
      const b = w.slice().slice();
      const m = read(b)!;
      const got: [string | null, number, number][] = [];
      eachNexthop(b, new DataView(b.buffer), m, (gw, i, f) => got.push([gw, i, f]));
      assertEquals(got, hops.map((x) => [x.gw ? String(x.gw) : null, x.ifindex, x.flags]));
    }),
    400,
  );
});

Deno.test("route messages (property): any bytes decode without a throw, reading nothing past the message", () => {
  const body = fc.oneof(
    mutatedBytes(route.map(encode)).map((b) => b.subarray(16)),
    fc.uint8Array({ maxLength: 160 }),
  );
  const readAll = (b: Uint8Array, len: number) => {
    const m = newRouteMsg();
    if (!readRouteMsg(b, new DataView(b.buffer, b.byteOffset, b.length), 0, len, m)) return null;
    const hops: unknown[] = [];
    eachNexthop(b, new DataView(b.buffer, b.byteOffset, b.length), m, (...x) => hops.push(x));
    return { ...m, hops };
  };
  check(
    fc.property(body, fc.uint8Array({ minLength: 1, maxLength: 64 }), (b, after) => {
      const alone = new Uint8Array(b);
      const r = readAll(alone, alone.length);
      assertEquals(readAll(new Uint8Array([...b, ...after]), b.length), r);
    }),
    800,
  );
});
