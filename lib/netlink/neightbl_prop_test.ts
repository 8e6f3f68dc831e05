/**
 * Properties of the neighbour-table decoder (parseNeighTable, `ip -s ntable show`, what doctor reads for the
 * ARP/NDP table's room): a table written as the kernel writes RTM_NEWNEIGHTBL reads back as that table; any
 * bytes decode without a throw and without reading past the message. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assertEquals } from "../../tests/assert.ts";
import { check, mutatedBytes } from "../../tests/prop.ts";
import { MsgWriter } from "./codec/msg.ts";
import { parseNeighTable } from "./neightbl.ts";
import type { NeighTableInfo } from "./types.ts";

const NDTA_NAME = 1, NDTA_THRESH1 = 2, NDTA_THRESH2 = 3, NDTA_THRESH3 = 4, NDTA_CONFIG = 5, NDTA_PARMS = 6;
const NDTA_STATS = 7, NDTA_GC_INTERVAL = 8;
const u32 = fc.integer({ min: 0, max: 0xffffffff });
const u53 = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });

const table = fc.record({
  family: fc.constantFrom(4, 6) as fc.Arbitrary<4 | 6>,
  name: fc.constantFrom("arp_cache", "ndisc_cache", "x"),
  entries: u32,
  gcThresh1: fc.option(u32),
  gcThresh2: fc.option(u32),
  gcThresh3: u32,
  gcIntervalMs: fc.option(u53),
  stats: fc.array(u53, { minLength: 11, maxLength: 11 }),
  parms: fc.boolean(),
});
type Table = typeof table extends fc.Arbitrary<infer T> ? T : never;

function u64(v: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(v), true);
  return b;
}

/** The RTM_NEWNEIGHTBL message of `t`: ndtmsg, then the attributes in the kernel's order. */
function encode(t: Table): Uint8Array {
  const w = new MsgWriter(64);
  const h = w.begin(64, 0, 1, 4);
  w.buf[h] = t.family === 4 ? 2 : 10;
  w.str(NDTA_NAME, t.name);
  if (t.gcThresh1 !== null) w.u32(NDTA_THRESH1, t.gcThresh1);
  if (t.gcThresh2 !== null) w.u32(NDTA_THRESH2, t.gcThresh2);
  w.u32(NDTA_THRESH3, t.gcThresh3);
  if (t.gcIntervalMs !== null) w.bytes(NDTA_GC_INTERVAL, u64(t.gcIntervalMs));
  const config = new Uint8Array(32); // struct ndt_config: ndtc_key_len, ndtc_entry_size (u16), ndtc_entries …
  new DataView(config.buffer).setUint32(4, t.entries, true);
  w.bytes(NDTA_CONFIG, config);
  if (t.parms) w.bytes(NDTA_PARMS, new Uint8Array(12));
  w.bytes(NDTA_STATS, new Uint8Array(t.stats.flatMap((v) => [...u64(v)])));
  w.end();
  return w.slice().slice();
}

function expected(t: Table): NeighTableInfo {
  const s = t.stats;
  return {
    name: t.name,
    family: t.family,
    entries: t.entries,
    gcThresh1: t.gcThresh1 ?? 0,
    gcThresh2: t.gcThresh2 ?? 0,
    gcThresh3: t.gcThresh3,
    gcIntervalMs: t.gcIntervalMs,
    allocs: s[0],
    destroys: s[1],
    resFailed: s[3],
    periodicGcRuns: s[8],
    forcedGcRuns: s[9],
    tableFulls: s[10],
  };
}

const parse = (b: Uint8Array, len = b.length) =>
  parseNeighTable(b, new DataView(b.buffer, b.byteOffset), 0, len);

Deno.test("neighbour tables (property): a table written as RTM_NEWNEIGHTBL reads back as that table", () => {
  check(
    fc.property(table, (t) => assertEquals(parse(encode(t).subarray(16)), expected(t))),
    400,
  );
});

Deno.test("neighbour tables (property): any bytes decode without a throw, reading nothing past the message", () => {
  const body = fc.oneof(
    mutatedBytes(table.map(encode)).map((m) => m.subarray(16)),
    fc.uint8Array({ maxLength: 200 }),
  );
  check(
    fc.property(body, fc.uint8Array({ minLength: 1, maxLength: 64 }), (b, after) => {
      const alone = new Uint8Array(b);
      const r = parse(alone);
      assertEquals(parse(new Uint8Array([...b, ...after]), b.length), r);
    }),
    400,
  );
});
