/**
 * neigh-gc: the host's neighbour tables as the kernel accounts them (RTM_GETNEIGHTBL): entries of every
 * namespace against gc_thresh1/2/3, and `table_fulls` / `forced_gc_runs` growing between two reads. The
 * tables and thresholds are host-wide, so the check sees a full table whichever namespace it checks.
 * @module
 */
import type { Check, Finding } from "../types.ts";
import { unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import type { NeighTableInfo } from "../../netlink/types.ts";
import { nodeNeighNeed, permanentCounts, recommendThresholds, sysctlPairs } from "../../observe/neigh_gc.ts";
import { sleep } from "../../base/sleep.ts";

/** Least time between the two reads of the counters (ms). */
export const NEIGH_REREAD_MS = 500;

/** What one table looks like over the check: its first read, the second (null: failed) and the gap. */
export interface TableReads {
  first: NeighTableInfo;
  second: NeighTableInfo | null;
  intervalMs: number;
}

/** The sysctl.d file the persist line writes for `family`. */
export function neighSysctlFile(family: 4 | 6): string {
  return `/etc/sysctl.d/80-flanctl-neigh-ipv${family}.conf`;
}

/**
 * The finding for one table. `nodes`: the cluster's node count from the leases (null: unknown); `vxlan`:
 * whether each node holds one permanent VXLAN entry per peer.
 */
export function assessTable(
  r: TableReads,
  nodes: number | null,
  vxlan: boolean,
  release?: string,
  permanent = 0,
): Finding {
  const t = r.second ?? r.first;
  // What the collector counts: permanent entries (seen in the host's named namespaces) are exempt since 4.20.
  const perm = permanentCounts(release) ? 0 : Math.min(permanent, t.entries);
  const counted = t.entries - perm;
  const th = { gcThresh1: t.gcThresh1, gcThresh2: t.gcThresh2, gcThresh3: t.gcThresh3 };
  const pct = t.gcThresh3 > 0 ? Math.round(((t.entries - perm) / t.gcThresh3) * 100) : 0;
  const fulls = r.second ? r.second.tableFulls - r.first.tableFulls : 0;
  const forced = r.second ? r.second.forcedGcRuns - r.first.forcedGcRuns : 0;
  const parts = [
    `${t.name}: ${t.entries} entries host-wide${perm ? ` (${perm} permanent, not counted)` : ""}, ` +
    `gc_thresh1/2/3 ${t.gcThresh1}/${t.gcThresh2}/${t.gcThresh3} (${pct}% of gc_thresh3)`,
    r.second
      ? `table_fulls +${fulls}, forced_gc_runs +${forced} in ${r.intervalMs} ms ` +
        `(${t.tableFulls}, ${t.forcedGcRuns} since boot)`
      : `table_fulls ${t.tableFulls}, forced_gc_runs ${t.forcedGcRuns} since boot (second read failed)`,
  ];
  const need = nodes !== null ? nodeNeighNeed(nodes, vxlan, t.family, release) : null;
  if (need) parts.push(`${nodes} nodes in the leases: ~${need.total} entries per node`);
  const problems: { sev: "critical" | "warning"; why: string }[] = [];
  if (fulls > 0) {
    problems.push({
      sev: "critical",
      why: `the table is full NOW: the kernel refused ${fulls} new entries during the check ("neighbor ` +
        `table overflow"); packets waiting on them are dropped (tx_dropped on flannel.1 and the underlay)`,
    });
  }
  if (forced > 0) {
    problems.push({
      sev: "warning",
      why: "the collector is forced on allocation (the table is past gc_thresh2): idle entries are evicted " +
        "and resolved again; past gc_thresh3 new ones are refused",
    });
  }
  // Permanent entries in unnamed namespaces stay counted here: near the limit is a warning, not critical.
  const near = counted >= t.gcThresh3 * 0.9;
  if (near || (counted > t.gcThresh2 && forced === 0 && fulls === 0)) {
    problems.push({
      sev: near && permanentCounts(release) && counted >= t.gcThresh3 ? "critical" : "warning",
      why: near
        ? "the table is close to gc_thresh3, where the kernel refuses new neighbours"
        : "the table is past gc_thresh2: allocations force garbage collection (at most every 5 s)",
    });
  }
  if (need && need.counted > t.gcThresh2) {
    problems.push({
      sev: "warning",
      why: `a node of a ${nodes}-node cluster needs ~${need.counted} entries the collector counts, more ` +
        `than gc_thresh2 ${t.gcThresh2}: the table overflows as traffic reaches every peer`,
    });
  }
  const detail = parts.join("; ");
  if (problems.length === 0) return { id: "neigh-gc", severity: "ok", detail };
  const want = recommendThresholds(Math.max(need?.total ?? 0, counted), th);
  const kv = sysctlPairs(t.family, want, th);
  const file = neighSysctlFile(t.family);
  return {
    id: "neigh-gc",
    severity: problems.some((p) => p.sev === "critical") ? "critical" : "warning",
    detail,
    why: problems.map((p) => p.why).join("; ") +
      " (thresholds are host-wide: set them in the initial namespace)",
    fix: kv.length
      ? [`sysctl -w ${kv.join(" ")}`]
      : ["find what fills the table: ip -s ntable show; ip neigh"],
    persist: kv.length
      ? [`printf '%s\\n' ${kv.map((x) => `'${x}'`).join(" ")} > ${file} && sysctl -p ${file}`]
      : [],
  };
}

/** The cluster's node count: the leases (live ones), or null without a store. */
function clusterNodes(ctx: NodeSnapshot): number | null {
  return ctx.store.state === "ok" && ctx.store.leases.length > 0 ? ctx.store.leases.length : null;
}

/** Whether IPv6 is in use here (then its table is checked too). */
function wantsV6(ctx: NodeSnapshot): boolean {
  return !!ctx.subnetEnv?.ipv6Network || ctx.store.config?.enableIPv6 === true;
}

/** neigh-gc: see the module doc. */
export const neighGc: Check = {
  id: "neigh-gc",
  title: "Neighbour tables (host-wide) below gc_thresh, not overflowing",
  async run(ctx) {
    const first = ctx.neighTables;
    if (!first) {
      return [
        unknown("neigh-gc", `cannot read the neighbour tables (RTM_GETNEIGHTBL): ${ctx.neighTablesError}`),
      ];
    }
    const wait = first.at + NEIGH_REREAD_MS - Date.now();
    if (wait > 0) await sleep(wait);
    let second: NeighTableInfo[] | null = null;
    const at = Date.now();
    try {
      second = ctx.readNeighTables();
    } catch { /* assessed from the first read */ }
    const nodes = clusterNodes(ctx);
    const vxlan = ctx.backendType === "vxlan";
    const out: Finding[] = [];
    for (const t of first.tables) {
      const t2 = second?.find((x) => x.family === t.family) ?? null;
      const f = assessTable(
        { first: t, second: t2, intervalMs: at - first.at },
        nodes,
        vxlan,
        undefined,
        // Counting them opens every named namespace: only when they could change the verdict.
        t.entries * 2 >= t.gcThresh2 ? ctx.neighPermanent(t.family) : 0,
      );
      // IPv6's table is reported when IPv6 is in use, or when it is in trouble anyway.
      if (t.family === 6 && !wantsV6(ctx) && f.severity === "ok") continue;
      if (t.family === 4 && ctx.ipv4Disabled && f.severity === "ok") continue;
      out.push(f);
    }
    return out.length ? out : [unknown("neigh-gc", "the kernel reported no IPv4/IPv6 neighbour table")];
  },
};
