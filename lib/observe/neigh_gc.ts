/**
 * Sizing the kernel's neighbour tables (ARP `arp_cache`, NDP `ndisc_cache`) for a cluster. The tables are
 * host-wide: every network namespace of a host shares one per family, and one set of thresholds
 * (`net.ipv{4,6}.neigh.default.gc_thresh1/2/3`, writable only in the initial namespace). Past gc_thresh2
 * the kernel forces a garbage collection on allocation (at most every 5 s); past gc_thresh3 with nothing
 * to collect it refuses new entries (`table_fulls`, "neighbor table overflow") and drops the packets
 * waiting on them. Permanent entries (flannel's VXLAN ARP entries) are exempt from that count since
 * Linux 4.20, but show in the table's `entries`.
 *
 * Pure arithmetic plus reading the host's thresholds; nothing here writes.
 * @module
 */
import { readCappedText } from "../base/capped_read.ts";
import { openNetlink, readNeighTables } from "../netlink/mod.ts";
import { listNamedNetns } from "../os/mod.ts";
import type { NeighTableInfo } from "../netlink/types.ts";

/** gc_thresh1/2/3 of one family. */
export interface GcThresholds {
  gcThresh1: number;
  gcThresh2: number;
  gcThresh3: number;
}

/** A lab (or any set of nodes sharing one host kernel) to size. */
export interface NeighLoad {
  nodes: number;
  podsPerNode: number;
  backend: string;
  /** True when the store is etcd on the underlay's gateway address (each node talks to it). */
  etcd: boolean;
}

/** The neighbour entries a load needs in one family's table, by source. */
export interface NeighNeed {
  family: 4 | 6;
  /** Underlay: every node resolves every other node's public address, N×(N−1). */
  underlay: number;
  /** flannel.1 / flannel-v6.1 entries, one per peer per node, N×(N−1) (vxlan only; permanent). */
  overlay: number;
  /** A pod's entry for its gateway (cni0) and cni0's entry for the pod: 2×N×P. */
  pods: number;
  /** Node ↔ store entries (etcd on the underlay gateway): 2×N. */
  store: number;
  /** 10 % of the dynamic entries + 16 (the host's own, link-local and router entries). */
  margin: number;
  /** Entries the garbage collector counts against the thresholds. */
  counted: number;
  /** Every entry the table will show (`entries`), permanent ones included. */
  total: number;
}

/**
 * True when permanent entries count against gc_thresh* on this kernel: before Linux 4.20 every entry did
 * (commit 58956317c8de "neighbor: Improve garbage collection" exempted permanent ones).
 */
export function permanentCounts(release = Deno.osRelease()): boolean {
  const m = /^(\d+)\.(\d+)/.exec(release);
  if (!m) return true;
  const [maj, min] = [Number(m[1]), Number(m[2])];
  return maj < 4 || (maj === 4 && min < 20);
}

/**
 * The entries a lab of `load` needs in the table of `family` (both tables are sized alike: each family
 * has its own table and its own thresholds). The formula, per family:
 *
 *   underlay N×(N−1) + overlay (vxlan) N×(N−1) + pods 2×N×P + store (etcd) 2×N + margin,
 *   margin = ceil(10 % × (underlay + pods + store)) + 16;
 *   counted = underlay + pods + store + margin (+ overlay on kernels before 4.20).
 */
export function labNeighNeed(load: NeighLoad, family: 4 | 6, release?: string): NeighNeed {
  const n = load.nodes, p = load.podsPerNode;
  const underlay = n * (n - 1);
  const overlay = load.backend === "vxlan" ? n * (n - 1) : 0;
  const pods = 2 * n * p;
  const store = load.etcd ? 2 * n : 0;
  const margin = Math.ceil((underlay + pods + store) * 0.1) + 16;
  const dynamic = underlay + pods + store + margin;
  return {
    family,
    underlay,
    overlay,
    pods,
    store,
    margin,
    counted: dynamic + (permanentCounts(release) ? overlay : 0),
    total: dynamic + overlay,
  };
}

/** kubelet's default --max-pods: the pods a real node's cni0 may hold. */
export const NODE_MAX_PODS = 110;

/**
 * The entries ONE real node of a cluster of `nodes` needs in a family's table: its peers on the underlay
 * (N−1, when they share its L2 network), its VXLAN device's entry per peer (N−1, permanent), its pods
 * (both ends: 2 × {@link NODE_MAX_PODS}) and the same margin as {@link labNeighNeed}.
 */
export function nodeNeighNeed(nodes: number, vxlan: boolean, family: 4 | 6, release?: string): NeighNeed {
  const peers = Math.max(0, nodes - 1);
  const pods = 2 * NODE_MAX_PODS;
  const margin = Math.ceil((peers + pods) * 0.1) + 16;
  const overlay = vxlan ? peers : 0;
  const dynamic = peers + pods + margin;
  return {
    family,
    underlay: peers,
    overlay,
    pods,
    store: 0,
    margin,
    counted: dynamic + (permanentCounts(release) ? overlay : 0),
    total: dynamic + overlay,
  };
}

/** The smallest power of two ≥ n. */
function pow2(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/**
 * Thresholds that hold `entries` with room: gc_thresh3 the power of two ≥ 2 × entries, gc_thresh2 half
 * of it (so the entries stay below it and no forced collection runs), gc_thresh1 a quarter; never lower
 * than `current`.
 */
export function recommendThresholds(entries: number, current: GcThresholds): GcThresholds {
  const t3 = Math.max(current.gcThresh3, pow2(Math.max(1024, 2 * entries)));
  return {
    gcThresh1: Math.max(current.gcThresh1, t3 / 4),
    gcThresh2: Math.max(current.gcThresh2, t3 / 2),
    gcThresh3: t3,
  };
}

/** sysctl key of a threshold: `net.ipv4.neigh.default.gc_thresh3`. */
export function gcKey(family: 4 | 6, which: 1 | 2 | 3): string {
  return `net.ipv${family}.neigh.default.gc_thresh${which}`;
}

/** `key=value` pairs setting `t` for `family` (only the ones that differ from `current`, when given). */
export function sysctlPairs(family: 4 | 6, t: GcThresholds, current?: GcThresholds): string[] {
  const out: string[] = [];
  for (const w of [1, 2, 3] as const) {
    const k = `gcThresh${w}` as const;
    if (!current || current[k] !== t[k]) out.push(`${gcKey(family, w)}=${t[k]}`);
  }
  return out;
}

/** /proc/sys path of a threshold. */
export function gcPath(family: 4 | 6, which: 1 | 2 | 3): string {
  return `/proc/sys/${gcKey(family, which).replaceAll(".", "/")}`;
}

/** The host's table of `family`: thresholds and counters (netlink), or null when it cannot be read. */
export function hostNeighTable(family: 4 | 6): NeighTableInfo | null {
  try {
    const h = openNetlink();
    try {
      return readNeighTables(h, family)[0] ?? null;
    } finally {
      h.close();
    }
  } catch {
    return null;
  }
}

/**
 * Permanent entries of `family` in this namespace and every named one (/var/run/netns): the part of the
 * table's `entries` the collector does not count (Linux ≥ 4.20). Namespaces without a name (containers)
 * are not seen: their permanent entries stay counted (the estimate errs towards a full table).
 */
export function permanentEntries(family: 4 | 6): number {
  let n = 0;
  for (const ns of [null, ...listNamedNetns()]) {
    try {
      const h = openNetlink(ns === null ? null : { name: ns });
      try {
        for (const e of h.neighbours(family)) if (e.state.includes("PERMANENT")) n++;
      } finally {
        h.close();
      }
    } catch { /* gone meanwhile */ }
  }
  return n;
}

/**
 * The entries of the host's table of `family` the collector counts now: `entries` less the permanent ones
 * seen ({@link permanentEntries}) on kernels that exempt them; null when the table cannot be read.
 */
export function countedEntries(family: 4 | 6, release?: string): number | null {
  const t = hostNeighTable(family);
  if (!t) return null;
  return permanentCounts(release) ? t.entries : Math.max(0, t.entries - permanentEntries(family));
}

/** The host's thresholds of `family` from /proc/sys (the initial namespace's), or null. */
export function hostThresholds(family: 4 | 6): GcThresholds | null {
  try {
    const v = ([1, 2, 3] as const).map((w) => Number(readCappedText(gcPath(family, w), 4096).trim()));
    if (v.some((x) => !Number.isInteger(x))) return null;
    return { gcThresh1: v[0], gcThresh2: v[1], gcThresh3: v[2] };
  } catch {
    return null;
  }
}

/** How a load fits in a host's table of one family. */
export interface NeighFit {
  family: 4 | 6;
  need: NeighNeed;
  /** Entries the collector counts now (host-wide, every namespace; see {@link countedEntries}). */
  current: number;
  /** current + need.counted: what the collector will count with the lab up (an upper bound). */
  counted: number;
  thresholds: GcThresholds;
  /** counted ≤ gc_thresh3. */
  fits: boolean;
  /** counted > gc_thresh2: forced collections will evict idle entries every 5 s. */
  pastThresh2: boolean;
  /** Thresholds that would hold it (≥ the current ones). */
  recommended: GcThresholds;
}

/** Compares `need` (plus the table's `current` entries) with `thresholds`. */
export function neighFit(need: NeighNeed, current: number, thresholds: GcThresholds): NeighFit {
  const counted = current + need.counted;
  return {
    family: need.family,
    need,
    current,
    counted,
    thresholds,
    fits: counted <= thresholds.gcThresh3,
    pastThresh2: counted > thresholds.gcThresh2,
    recommended: recommendThresholds(current + need.total, thresholds),
  };
}

/** One line explaining a fit: the need by source and the thresholds. */
export function describeFit(f: NeighFit): string {
  const n = f.need;
  const t = f.thresholds;
  const parts = [`underlay ${n.underlay}`];
  if (n.overlay) parts.push(`flannel.1 ${n.overlay} (permanent)`);
  parts.push(`pods ${n.pods}`);
  if (n.store) parts.push(`store ${n.store}`);
  parts.push(`margin ${n.margin}`);
  return `IPv${f.family} neighbour table: the lab needs ${n.total} entries (${parts.join(", ")}), ` +
    `${n.counted} counted by the collector; the host's table counts ${f.current} now: ${f.counted} against ` +
    `gc_thresh1/2/3 ${t.gcThresh1}/${t.gcThresh2}/${t.gcThresh3}`;
}
