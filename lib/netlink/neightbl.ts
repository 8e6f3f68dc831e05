/**
 * Neighbour tables as the kernel accounts them (RTM_GETNEIGHTBL, `ip -s ntable show`): one table per
 * family (arp_cache, ndisc_cache) shared by every network namespace of the host, with its entry count,
 * garbage-collection thresholds and statistics (`table_fulls`, `forced_gc_runs`, …). The answer is the
 * same from any namespace: the thresholds and counters are host-wide.
 * @module
 */
import { AF_INET, AF_INET6, AF_UNSPEC, fam, RTM_GETNEIGHTBL } from "./codec/consts.ts";
import { attrStr, AttrWalk } from "./codec/attrs.ts";
import type { Conn } from "./conn.ts";
import { scan } from "./io.ts";
import type { NeighTableInfo } from "./types.ts";

/** NDTA_* attributes (linux/neighbour.h). */
const NDTA_NAME = 1,
  NDTA_THRESH1 = 2,
  NDTA_THRESH2 = 3,
  NDTA_THRESH3 = 4,
  NDTA_CONFIG = 5,
  NDTA_STATS = 7,
  NDTA_GC_INTERVAL = 8;
/** Offsets in struct ndt_config: ndtc_entries (u32). */
const NDTC_ENTRIES = 4;
/** Offsets in struct ndt_stats (eleven u64). */
const STATS = {
  allocs: 0,
  destroys: 8,
  resFailed: 24,
  periodicGcRuns: 64,
  forcedGcRuns: 72,
  tableFulls: 80,
} as const;

/** Reads one table message's attributes (after struct ndtmsg); null for a per-device parameter message. */
export function parseNeighTable(
  b: Uint8Array,
  dv: DataView,
  off: number,
  len: number,
): NeighTableInfo | null {
  const f = fam(b[off]);
  if (f === null) return null;
  const t: Partial<NeighTableInfo> & { family: 4 | 6 } = { family: f };
  let stats = false;
  for (const at = new AttrWalk(dv, off + 4, off + len); at.next();) {
    const type = at.type, v = at.v, vlen = at.vlen;
    if (type === NDTA_NAME) t.name = attrStr(b, v, vlen);
    else if (type === NDTA_THRESH1 && vlen >= 4) t.gcThresh1 = dv.getUint32(v, true);
    else if (type === NDTA_THRESH2 && vlen >= 4) t.gcThresh2 = dv.getUint32(v, true);
    else if (type === NDTA_THRESH3 && vlen >= 4) t.gcThresh3 = dv.getUint32(v, true);
    else if (type === NDTA_GC_INTERVAL && vlen >= 8) t.gcIntervalMs = Number(dv.getBigUint64(v, true));
    else if (type === NDTA_CONFIG && vlen >= NDTC_ENTRIES + 4) {
      t.entries = dv.getUint32(v + NDTC_ENTRIES, true);
    } else if (type === NDTA_STATS && vlen >= STATS.tableFulls + 8) {
      stats = true;
      const u64 = (o: number) => Number(dv.getBigUint64(v + o, true));
      t.allocs = u64(STATS.allocs);
      t.destroys = u64(STATS.destroys);
      t.resFailed = u64(STATS.resFailed);
      t.periodicGcRuns = u64(STATS.periodicGcRuns);
      t.forcedGcRuns = u64(STATS.forcedGcRuns);
      t.tableFulls = u64(STATS.tableFulls);
    }
  }
  // Table messages carry the thresholds and statistics; per-device parameter messages only NDTA_PARMS.
  if (t.gcThresh3 === undefined || t.entries === undefined || !stats || !t.name) return null;
  return {
    name: t.name,
    family: f,
    entries: t.entries,
    gcThresh1: t.gcThresh1 ?? 0,
    gcThresh2: t.gcThresh2 ?? 0,
    gcThresh3: t.gcThresh3,
    gcIntervalMs: t.gcIntervalMs ?? null,
    allocs: t.allocs!,
    destroys: t.destroys!,
    resFailed: t.resFailed!,
    periodicGcRuns: t.periodicGcRuns!,
    forcedGcRuns: t.forcedGcRuns!,
    tableFulls: t.tableFulls!,
  };
}

/** The IPv4 (arp_cache) and IPv6 (ndisc_cache) neighbour tables, or those of `family`. */
export function neighTables(c: Conn, family?: 4 | 6): NeighTableInfo[] {
  const req = new Uint8Array(4); // struct ndtmsg: family, pad
  req[0] = family === 4 ? AF_INET : family === 6 ? AF_INET6 : AF_UNSPEC;
  const out: NeighTableInfo[] = [];
  scan(c, "ntable show", RTM_GETNEIGHTBL, req, (b, dv, off, len) => {
    const t = parseNeighTable(b, dv, off, len);
    // A dump continued in another datagram repeats the table's own message before its next parameters.
    if (t && (!family || t.family === family) && !out.some((x) => x.name === t.name)) out.push(t);
  }, false);
  return out;
}
