import { assertEquals } from "../../tests/assert.ts";
import { type CheckReport, formatCheck, pool, tableFullReason } from "./check.ts";
import type { NeighTableInfo } from "../netlink/types.ts";

const arp = (tableFulls: number, forcedGcRuns: number): NeighTableInfo => ({
  name: "arp_cache",
  family: 4,
  entries: 3474,
  gcThresh1: 128,
  gcThresh2: 512,
  gcThresh3: 1024,
  gcIntervalMs: 30000,
  allocs: 0,
  destroys: 0,
  resFailed: 0,
  periodicGcRuns: 0,
  forcedGcRuns,
  tableFulls,
});

function report(over: Partial<CheckReport> = {}): CheckReport {
  return {
    convergence: { ok: true, ms: 1234, want: 49, lagging: [] },
    results: [],
    pingMs: 2500,
    parallel: 16,
    neigh: [{ family: 4, before: arp(5, 5), after: arp(5, 5) }],
    ...over,
  };
}

Deno.test("lab check: a working lab is one verdict line, retries counted, no wall of lines", () => {
  const results = Array.from({ length: 2450 }, (_, i) => ({
    from: `a${i}`,
    to: "b",
    ip: "10.244.1.2",
    ok: true,
    tries: i < 3 ? 2 : 1,
  }));
  assertEquals(formatCheck(report({ results })), [
    "daemons: every one reports all 49 peers (1.2 s)",
    "cross-node ping: 2450 pairs (every pod to the first pod of every other node), 16 at a time, 2.5 s",
    "all 2450 ok (3 answered on a retry)",
  ]);
});

Deno.test("lab check: failures are explained, cut after 20, and the neighbour counters are shown", () => {
  const neigh = [{ family: 4 as const, before: arp(82710, 83107), after: arp(82790, 83190) }];
  const reason = tableFullReason(neigh, 4)!;
  assertEquals(
    reason,
    "neighbour table full: arp_cache refused 80 entries during the check (3474 entries host-wide, gc_thresh3 " +
      "1024; see flanctl doctor, lab up --tune-host)",
  );
  assertEquals(tableFullReason(neigh, 6), null);
  const results = Array.from({ length: 30 }, (_, i) => ({
    from: `node${i}-pod1`,
    to: "node1-pod1",
    ip: "10.244.1.2",
    ok: i >= 25,
    tries: i >= 25 ? 1 : 3,
    reason,
  }));
  const lines = formatCheck(
    report({
      results,
      neigh,
      convergence: {
        ok: false,
        ms: 60000,
        want: 49,
        lagging: [{ node: "node7", peers: 40, alive: true }, { node: "node9", peers: null, alive: false }],
      },
    }),
    3,
  );
  assertEquals(lines, [
    "daemons: 2 not converged after 60.0 s: node7 40/49, node9 not running",
    "cross-node ping: 30 pairs (every pod to the first pod of every other node), 16 at a time, 2.5 s",
    `  node0-pod1 -> node1-pod1 (10.244.1.2): FAILED: ${reason}`,
    `  node1-pod1 -> node1-pod1 (10.244.1.2): FAILED: ${reason}`,
    `  node2-pod1 -> node1-pod1 (10.244.1.2): FAILED: ${reason}`,
    "  … and 22 more",
    "25 of 30 FAILED after 3 tries",
    "arp_cache: table_fulls +80, forced_gc_runs +83 during the pings (3474 entries, gc_thresh2/3 512/1024; host-wide)",
  ]);
});

Deno.test("lab check: pool keeps order and never runs more than its limit", async () => {
  let live = 0, most = 0;
  const out = await pool([5, 1, 4, 2, 3], 2, async (x) => {
    live++;
    most = Math.max(most, live);
    await new Promise((r) => setTimeout(r, x));
    live--;
    return x * 10;
  });
  assertEquals([out, most], [[50, 10, 40, 20, 30], 2]);
});

Deno.test("lab check: a backend without a data plane says why nothing was pinged", () => {
  const r = report({
    convergence: { ok: true, ms: 500, want: 0, lagging: [] },
    skipped: "backend alloc has no data plane between nodes",
  });
  assertEquals(formatCheck(r), [
    "daemons: every one reports all 0 peers (0.5 s)",
    "cross-node ping: skipped, backend alloc has no data plane between nodes",
  ]);
});
