/**
 * Properties of the route, neighbour and FDB request writers (encode.ts), the bytes every reconcile and CNI
 * call sends: a spec is refused with a ParseError (or the lookup's NetlinkError) before a byte is written,
 * or written as one well-formed message whose fields decode back to the spec; a batch is its messages one
 * after another (the reused scratch buffers leak nothing between them). Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../../tests/assert.ts";
import { anyText, check, ipv4Addr, ipv4Net, ipv6Addr, ipv6Net, outcome } from "../../../tests/prop.ts";
import { ParseError } from "../../base/errors.ts";
import { NetlinkError } from "../../sys/errors.ts";
import { MsgWriter } from "./msg.ts";
import { type IndexOf, putReplaceFdb, putReplaceNeigh, putRoute } from "./encode.ts";
import { parseMac, parsePrefix, protocolValue, scopeValue } from "./format.ts";
import {
  RTA_DST,
  RTA_GATEWAY,
  RTA_OIF,
  RTA_PREFSRC,
  RTA_PRIORITY,
  RTA_TABLE,
  RTNH_F_ONLINK,
} from "./consts.ts";
import type { NeighSpec, RouteSpec } from "../types.ts";

/** The device lookup: ifindexes as they are, two known names, any other name a "Cannot find device". */
const index: IndexOf = (ref, op) => {
  if (typeof ref === "number") return ref;
  const i = { eth0: 2, "flannel.1": 7 }[ref];
  if (i === undefined) throw new NetlinkError(op(), -19, "No such device");
  return i;
};
const isTyped = (e: unknown) => e instanceof ParseError || e instanceof NetlinkError;

const ipText = fc.oneof(ipv4Addr.map(String), ipv6Addr.map(String));
const routeSpec: fc.Arbitrary<RouteSpec> = fc.record({
  dst: fc.oneof(
    { weight: 5, arbitrary: ipv4Net.map(String) },
    { weight: 3, arbitrary: ipv6Net.map(String) },
    {
      weight: 1,
      arbitrary: fc.constantFrom("default", "10.0.0.5/24", "10.0.0.0/33", "10.0.0.0/", "fc00::/129"),
    },
    { weight: 1, arbitrary: anyText },
  ),
  via: ipText,
  dev: fc.oneof(fc.integer({ min: 1, max: 1 << 20 }), fc.constantFrom("eth0", "flannel.1", "nope")),
  onlink: fc.boolean(),
  scope: fc.constantFrom("universe", "link", "host", "galaxy") as fc.Arbitrary<RouteSpec["scope"]>,
  table: fc.oneof(fc.constantFrom(254, 255, 1000), fc.integer({ min: -1, max: 2 ** 33 }), fc.double()),
  protocol: fc.oneof(
    fc.integer({ min: -1, max: 300 }),
    fc.constantFrom("boot", "static", "bird", "42", "nope"),
  ),
  metric: fc.oneof(fc.nat(), fc.integer({ min: -1, max: 2 ** 34 }), fc.double()),
  src: ipText,
  type: fc.constantFrom("unicast", "blackhole") as fc.Arbitrary<RouteSpec["type"]>,
}, { requiredKeys: ["dst"] }).map((s) => s as unknown as RouteSpec); // raw text, as the writer may get it

/** The attributes of the message at `b[0..len)` after a header of `hdr` bytes: type → value bytes. */
function attrs(b: Uint8Array, hdr: number): Map<number, Uint8Array> {
  const dv = new DataView(b.buffer, b.byteOffset, b.length);
  const len = dv.getUint32(0, true);
  assertEquals(len, b.length, "nlmsg_len is the message's length");
  const m = new Map<number, Uint8Array>();
  let a = 16 + hdr;
  while (a < len) {
    const alen = dv.getUint16(a, true);
    assert(alen >= 4 && a + alen <= len, `attribute at ${a} of length ${alen} fits`);
    m.set(dv.getUint16(a + 2, true), b.slice(a + 4, a + alen));
    a += (alen + 3) & ~3;
  }
  assertEquals(a, len, "the attributes end at the message's end");
  return m;
}

const u32 = (b: Uint8Array | undefined) => b && new DataView(b.buffer, b.byteOffset).getUint32(0, true);

/** Writes `f(w)` into a writer holding `before` bytes already: the new message, or the typed error. */
function write(f: (w: MsgWriter) => void) {
  const w = new MsgWriter(16);
  w.begin(3, 0, 0, 0);
  w.end(); // a message already in the batch
  const r = outcome(() => f(w), isTyped);
  if (!r.ok) {
    assertEquals([w.len, w.count], [16, 1], "nothing written for a refused spec");
    return null;
  }
  assertEquals(w.count, 2);
  return w.buf.slice(16, w.len);
}

Deno.test("route requests (property): refused before writing, or one message that decodes to the spec", () => {
  check(
    fc.property(routeSpec, fc.boolean(), (spec, del) => {
      const msg = write((w) => putRoute(w, spec, del, index, 9, 0, () => "op"));
      if (msg === null) return;
      const a = attrs(msg, 12);
      const dst = parsePrefix(spec.dst, "dst", {
        allowDefault: true,
        defaultFamily: (spec.via ?? spec.src)?.includes(":") ? 6 : 4,
      });
      assertEquals([msg[16], msg[17]], [dst.family === 4 ? 2 : 10, dst.prefix], "rtm_family, rtm_dst_len");
      assertEquals(a.get(RTA_DST), dst.prefix > 0 ? dst.bytes : undefined);
      const table = (spec.table ?? 254) + 0; // -0 is written as 0
      assertEquals([u32(a.get(RTA_TABLE)), msg[20]], [table, table < 256 ? table : 0]);
      assertEquals(u32(a.get(RTA_PRIORITY)), spec.metric === undefined ? undefined : spec.metric + 0);
      assertEquals(msg[21], del && spec.protocol === undefined ? 0 : protocolValue(spec.protocol, "p"));
      if (spec.scope !== undefined) assertEquals(msg[22], scopeValue(spec.scope, "s"));
      assertEquals(u32(a.get(RTA_OIF)), spec.dev === undefined ? undefined : index(spec.dev, () => ""));
      // Every address of the message is of the route's family (the kernel refuses another).
      for (const t of [RTA_GATEWAY, RTA_PREFSRC]) {
        const v = a.get(t);
        if (v) assertEquals(v.length, dst.family === 4 ? 4 : 16, `attribute ${t}`);
      }
      if (spec.via) assertEquals(a.get(RTA_GATEWAY), parsePrefix(spec.via, "via").bytes);
      const onlink = new DataView(msg.buffer).getUint32(24, true) & RTNH_F_ONLINK;
      assertEquals(onlink !== 0, !!spec.onlink && (spec.dev !== undefined || spec.via !== undefined));
    }),
    1000,
  );
});

Deno.test("route requests (property): a batch is its messages one after another", () => {
  // Valid specs by construction: a destination, a gateway of its family, the rest in range.
  const valid: fc.Arbitrary<RouteSpec> = fc.oneof(
    fc.tuple(ipv4Net, fc.option(ipv4Addr)),
    fc.tuple(ipv6Net, fc.option(ipv6Addr)),
  ).chain(([dst, via]) =>
    fc.record({
      dst: fc.constant(String(dst)),
      via: fc.constant(via === null ? undefined : String(via)),
      dev: fc.oneof(fc.integer({ min: 1, max: 1 << 20 }), fc.constantFrom("eth0", "flannel.1")),
      onlink: fc.boolean(),
      table: fc.oneof(fc.constantFrom(254, 255), fc.integer({ min: 0, max: 0xffffffff })),
      metric: fc.integer({ min: 0, max: 0xffffffff }),
      protocol: fc.constantFrom("boot", "static", 42),
    }, { requiredKeys: ["dst"] }).map((s) => s as unknown as RouteSpec)
  );
  check(
    fc.property(fc.array(valid, { minLength: 2, maxLength: 5 }), (specs) => {
      const batch = new MsgWriter(64);
      specs.forEach((s, i) => putRoute(batch, s, false, index, i, 0, () => ""));
      const alone = specs.map((s, i) => {
        const w = new MsgWriter(16);
        putRoute(w, s, false, index, i, 0, () => "");
        return [...w.slice()];
      });
      assertEquals([...batch.slice()], alone.flat());
    }),
    300,
  );
});

const macText = fc.uint8Array({ minLength: 6, maxLength: 6 }).chain((b) =>
  fc.constantFrom(":", "-").map((sep) => [...b].map((x) => x.toString(16).padStart(2, "0")).join(sep))
);

Deno.test("neighbour and FDB requests (property): refused before writing, or the entry asked for", () => {
  const spec = fc.record({
    dev: fc.oneof(fc.integer({ min: 1, max: 1 << 20 }), fc.constantFrom("flannel.1", "nope")),
    dst: fc.oneof(ipText, anyText),
    lladdr: fc.oneof(macText, fc.constantFrom("aa:bb:cc:dd:ee", "zz:bb:cc:dd:ee:ff"), anyText),
    state: fc.constantFrom("permanent", "reachable", "noarp", "stale"),
  }, { requiredKeys: ["dev", "dst", "lladdr"] }) as fc.Arbitrary<NeighSpec>;
  check(
    fc.property(spec, fc.boolean(), (n, fdb) => {
      const msg = write((w) =>
        fdb
          ? putReplaceFdb(w, { dev: n.dev, mac: n.lladdr, dst: n.dst }, index, 1, 0)
          : putReplaceNeigh(w, n, index, 1, 0)
      );
      if (msg === null) return;
      const a = attrs(msg, 12);
      const dst = parsePrefix(n.dst, "dst").bytes;
      assertEquals(a.get(1), dst, "NDA_DST");
      assertEquals(a.get(2), parseMac(n.lladdr), "NDA_LLADDR");
      const dv = new DataView(msg.buffer);
      assertEquals(msg[16], fdb ? 7 : dst.length === 4 ? 2 : 10, "ndm_family");
      assertEquals(dv.getInt32(20, true), index(n.dev, () => ""), "ndm_ifindex");
      const nud =
        { permanent: 0x80, reachable: 0x02, noarp: 0x40 }[fdb ? "permanent" : n.state ?? "permanent"];
      assertEquals(dv.getUint16(24, true), nud, "ndm_state");
      assertEquals(msg[26], fdb ? 0x02 : 0, "ndm_flags");
    }),
    600,
  );
});
