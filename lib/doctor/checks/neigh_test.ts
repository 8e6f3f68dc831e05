import { assert, assertEquals, assertStringIncludes } from "../../../tests/assert.ts";
import { offlineSnapshot } from "../../observe/fake/offline_snapshot.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import type { NeighTableInfo } from "../../netlink/types.ts";
import type { Lease } from "../../store/types.ts";
import { assessTable, neighGc } from "./neigh.ts";

/** A table as RTM_GETNEIGHTBL reports it (the numbers of issue 31's 50-node lab by default). */
function table(over: Partial<NeighTableInfo> = {}): NeighTableInfo {
  return {
    name: "arp_cache",
    family: 4,
    entries: 3474,
    gcThresh1: 128,
    gcThresh2: 512,
    gcThresh3: 1024,
    gcIntervalMs: 30000,
    allocs: 100000,
    destroys: 96000,
    resFailed: 0,
    periodicGcRuns: 10,
    forcedGcRuns: 83107,
    tableFulls: 82710,
    ...over,
  };
}

const NEW_KERNEL = "6.18.0";

Deno.test("neigh-gc: a table refusing entries between the two reads is critical, fix sized from entries", () => {
  const f = assessTable(
    {
      first: table(),
      second: table({ tableFulls: 82790, forcedGcRuns: 83190 }),
      intervalMs: 500,
    },
    50,
    true,
    NEW_KERNEL,
  );
  assertEquals(f.severity, "critical");
  assertEquals(
    f.detail,
    "arp_cache: 3474 entries host-wide, gc_thresh1/2/3 128/512/1024 (339% of gc_thresh3); " +
      "table_fulls +80, forced_gc_runs +83 in 500 ms (82790, 83190 since boot); " +
      "50 nodes in the leases: ~361 entries per node",
  );
  assertStringIncludes(f.why!, "the kernel refused 80 new entries during the check");
  assertEquals(f.fix, [
    "sysctl -w net.ipv4.neigh.default.gc_thresh1=2048 net.ipv4.neigh.default.gc_thresh2=4096 " +
    "net.ipv4.neigh.default.gc_thresh3=8192",
  ]);
  assertEquals(f.persist, [
    "printf '%s\\n' 'net.ipv4.neigh.default.gc_thresh1=2048' 'net.ipv4.neigh.default.gc_thresh2=4096' " +
    "'net.ipv4.neigh.default.gc_thresh3=8192' > /etc/sysctl.d/80-flanctl-neigh-ipv4.conf && " +
    "sysctl -p /etc/sysctl.d/80-flanctl-neigh-ipv4.conf",
  ]);
});

Deno.test("neigh-gc: counters flat and the table small: ok, with past overflows named but not flagged", () => {
  const t = table({ entries: 53, tableFulls: 7, forcedGcRuns: 9 });
  const f = assessTable({ first: t, second: t, intervalMs: 512 }, 3, true, NEW_KERNEL);
  assertEquals(f, {
    id: "neigh-gc",
    severity: "ok",
    detail: "arp_cache: 53 entries host-wide, gc_thresh1/2/3 128/512/1024 (5% of gc_thresh3); " +
      "table_fulls +0, forced_gc_runs +0 in 512 ms (7, 9 since boot); 3 nodes in the leases: ~263 entries per node",
  });
});

Deno.test("neigh-gc: forced collections growing (past gc_thresh2) is a warning", () => {
  const first = table({ entries: 600, tableFulls: 0, forcedGcRuns: 4 });
  const f = assessTable(
    { first, second: { ...first, forcedGcRuns: 5 }, intervalMs: 500 },
    null,
    true,
    NEW_KERNEL,
  );
  assertEquals(f.severity, "warning");
  assertStringIncludes(f.why!, "the collector is forced on allocation");
  // Sized from the entries alone (no leases): 2 × 600 → 2048.
  assertEquals(f.fix, [
    "sysctl -w net.ipv4.neigh.default.gc_thresh1=512 net.ipv4.neigh.default.gc_thresh2=1024 " +
    "net.ipv4.neigh.default.gc_thresh3=2048",
  ]);
});

Deno.test("neigh-gc: a 1000-node cluster on default thresholds is flagged before it overflows", () => {
  const t = table({ entries: 300, tableFulls: 0, forcedGcRuns: 0 });
  const f = assessTable({ first: t, second: t, intervalMs: 500 }, 1000, true, NEW_KERNEL);
  assertEquals(f.severity, "warning");
  assertStringIncludes(f.why!, "a node of a 1000-node cluster needs ~1357 entries the collector counts");
  assertEquals(f.fix, [
    "sysctl -w net.ipv4.neigh.default.gc_thresh1=2048 net.ipv4.neigh.default.gc_thresh2=4096 " +
    "net.ipv4.neigh.default.gc_thresh3=8192",
  ]);
});

Deno.test("neigh-gc: IPv6 table keys, and only the thresholds that change are set", () => {
  const first = table({
    name: "ndisc_cache",
    family: 6,
    entries: 7500,
    gcThresh1: 4096,
    gcThresh2: 6000,
    gcThresh3: 8192,
  });
  const f = assessTable({ first, second: first, intervalMs: 500 }, null, false, NEW_KERNEL);
  assertEquals(f.severity, "warning");
  assertEquals(f.fix, [
    "sysctl -w net.ipv6.neigh.default.gc_thresh2=8192 net.ipv6.neigh.default.gc_thresh3=16384",
  ]);
  assertStringIncludes(f.persist![0], "> /etc/sysctl.d/80-flanctl-neigh-ipv6.conf");
});

Deno.test("neigh-gc: permanent entries (another namespace's 5,000 VXLAN peers) are not counted on 4.20+", () => {
  const t = table({ entries: 5087, tableFulls: 3, forcedGcRuns: 15 });
  const f = assessTable({ first: t, second: t, intervalMs: 500 }, 2, true, NEW_KERNEL, 5000);
  assertEquals(f.severity, "ok");
  assertEquals(
    f.detail,
    "arp_cache: 5087 entries host-wide (5000 permanent, not counted), gc_thresh1/2/3 128/512/1024 (8% of " +
      "gc_thresh3); table_fulls +0, forced_gc_runs +0 in 500 ms (3, 15 since boot); 2 nodes in the leases: " +
      "~261 entries per node",
  );
  // Before 4.20 every entry counts: past gc_thresh3 is critical.
  assertEquals(
    assessTable({ first: t, second: t, intervalMs: 500 }, 2, true, "4.19.0", 5000).severity,
    "critical",
  );
});

function fakeContext(reads: NeighTableInfo[][], leases: number): NodeSnapshot {
  const ctx = offlineSnapshot();
  ctx.neighPermanent = () => 0;
  let i = 0;
  ctx.readNeighTables = () => {
    const r = reads[Math.min(i++, reads.length - 1)];
    if (!r) throw new Error("netlink: Operation not permitted");
    return r;
  };
  if (reads.length) ctx.neighTables = { at: Date.now(), tables: ctx.readNeighTables() };
  ctx.store.state = "ok";
  ctx.store.leases = Array.from({ length: leases }, () => ({}) as Lease);
  return ctx;
}

Deno.test("neigh-gc run: reads the counters twice through the context, >= 500 ms apart", async () => {
  const v4 = table(),
    v6 = table({ name: "ndisc_cache", family: 6, entries: 4, tableFulls: 0, forcedGcRuns: 0 });
  const ctx = fakeContext([[v4, v6], [{ ...v4, tableFulls: v4.tableFulls + 3 }, v6]], 50);
  const t0 = Date.now();
  const out = await neighGc.run(ctx);
  assert(Date.now() - t0 >= 450, "the second read waits for the interval");
  // IPv6 is not in use and its table is fine: only the IPv4 table is reported.
  assertEquals(out.length, 1);
  assertEquals(out[0].severity, "critical");
  assertStringIncludes(out[0].detail, "table_fulls +3, forced_gc_runs +0 in ");
});

Deno.test("neigh-gc run: an IPv6 table in trouble is reported although IPv6 is not configured", async () => {
  const v4 = table({ entries: 10, tableFulls: 0, forcedGcRuns: 0 });
  const v6 = table({ name: "ndisc_cache", family: 6, entries: 1100, tableFulls: 1, forcedGcRuns: 1 });
  const ctx = fakeContext([[v4, v6], [v4, { ...v6, tableFulls: 2, forcedGcRuns: 2 }]], 2);
  const out = await neighGc.run(ctx);
  assertEquals(out.map((f) => [f.severity, f.detail.split(":")[0]]), [["ok", "arp_cache"], [
    "critical",
    "ndisc_cache",
  ]]);
});

Deno.test("neigh-gc run: unreadable tables are unknown; a failed second read still assesses the first", async () => {
  const none = fakeContext([], 0);
  none.neighTables = null;
  none.neighTablesError = "netlink: Operation not permitted";
  const u = await neighGc.run(none);
  assertEquals(u[0].severity, "unknown");
  assertStringIncludes(u[0].detail, "RTM_GETNEIGHTBL): netlink: Operation not permitted");
  const v4 = table({ entries: 1000, tableFulls: 0, forcedGcRuns: 0 });
  const half = fakeContext([[v4]], 0);
  half.readNeighTables = () => {
    throw new Error("gone");
  };
  const f = await neighGc.run(half);
  assertEquals(f[0].severity, "warning");
  assertStringIncludes(f[0].detail, "table_fulls 0, forced_gc_runs 0 since boot (second read failed)");
});
