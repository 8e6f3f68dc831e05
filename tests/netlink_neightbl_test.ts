/**
 * Kernel layer, neighbour tables (RTM_GETNEIGHTBL): the host-wide tables read from inside a test
 * namespace equal `ip -s ntable show` (thresholds from /proc/sys of the initial namespace), and entries
 * made in the namespace count in the host's table. Thresholds are only read, never written.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { run, sh, withNetns } from "./netns.ts";
import { openNetlink, readNeighTables } from "../lib/netlink/mod.ts";

const proc = (p: string) => Number(Deno.readTextFileSync(`/proc/sys/net/${p}`).trim());

/** `ip -s ntable show name NAME`: the table's line values by key (first block only: the table's own). */
async function ipNtable(name: string): Promise<Map<string, number>> {
  const r = await run(["ip", "-s", "ntable", "show", "name", name]);
  const block = r.stdout.split("\n\n")[0];
  const m = new Map<string, number>();
  for (const [, k, v] of block.matchAll(/\b([a-z_0-9]+) (\d+)\b/g)) if (!m.has(k)) m.set(k, Number(v));
  return m;
}

needsRoot.test("netlink readNeighTables: host-wide tables, thresholds and counters as ip -s ntable shows them", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("nt");
    await sh("ip", "-n", ns, "link", "add", "nb0", "type", "bridge");
    await sh("ip", "-n", ns, "link", "set", "nb0", "up");
    await sh("ip", "-n", ns, "addr", "add", "10.98.0.1/16", "dev", "nb0");
    const h = openNetlink({ name: ns });
    try {
      const before = readNeighTables(h);
      assertEquals(before.map((t) => [t.name, t.family]), [["arp_cache", 4], ["ndisc_cache", 6]]);
      for (const t of before) {
        const f = t.family === 4 ? "ipv4" : "ipv6";
        assertEquals([t.gcThresh1, t.gcThresh2, t.gcThresh3], [
          proc(`${f}/neigh/default/gc_thresh1`),
          proc(`${f}/neigh/default/gc_thresh2`),
          proc(`${f}/neigh/default/gc_thresh3`),
        ]);
      }
      // 50 entries in this namespace: the host's table (every namespace's) holds at least them.
      const lines = Array.from(
        { length: 50 },
        (_, i) =>
          `neigh add 10.98.1.${i + 1} lladdr 02:00:00:00:01:${
            i.toString(16).padStart(2, "0")
          } dev nb0 nud stale`,
      );
      const b = await run(["ip", "-n", ns, "-batch", "-"], { stdin: lines.join("\n") + "\n" });
      assertEquals(b.code, 0, b.stderr);
      const [v4] = readNeighTables(h, 4);
      assert(v4.entries >= 50, `entries ${v4.entries}`);
      assert(v4.allocs >= before[0].allocs + 50, `allocs ${before[0].allocs} → ${v4.allocs}`);
      // Counters never go back and match iproute2's reading, taken around ours.
      const ipt = await ipNtable("arp_cache");
      const [after] = readNeighTables(h, 4);
      assertEquals(after.gcIntervalMs, ipt.get("gc_int"));
      for (
        const [ours, theirs] of [["tableFulls", "table_fulls"], ["forcedGcRuns", "forced_gc_runs"]] as const
      ) {
        assert(
          v4[ours] <= ipt.get(theirs)! && ipt.get(theirs)! <= after[ours],
          `${theirs}: ${JSON.stringify(ipt)}`,
        );
      }
    } finally {
      h.close();
    }
  });
});
