/**
 * `lab up` sizes itself against the host's neighbour tables: the tables (and their gc_thresh1/2/3) are
 * shared by every namespace of the host, so a lab of N nodes needs about N×(N−1) entries of them
 * (lib/observe/neigh_gc.ts has the formula). When the lab does not fit, `lab up` refuses with the numbers
 * and the sysctl lines, or — only with `--tune-host` — raises the thresholds, recording what it changed in
 * the lab's state BEFORE changing it; `lab down` restores them (or hands the record to a lab still up).
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import {
  countedEntries,
  describeFit,
  gcKey,
  gcPath,
  type GcThresholds,
  hostNeighTable,
  hostThresholds,
  labNeighNeed,
  type NeighFit,
  neighFit,
  type NeighLoad,
  type NeighNeed,
  sysctlPairs,
} from "../observe/neigh_gc.ts";
import type { HostTuning, LabState } from "./types.ts";
import { labRoot } from "./paths.ts";
import { readState, saveState } from "./state.ts";
import { sleep } from "../base/sleep.ts";

/** The lab does not fit the host's neighbour tables (nothing was made). */
export class LabTooBigError extends FlanctlError {
  constructor(message: string) {
    super(message, 1);
  }
}

/** The families of a lab's --ip-family. */
export function labFamilies(ipFamily: LabState["ipFamily"]): (4 | 6)[] {
  return ipFamily === "dual" ? [4, 6] : ipFamily === "ipv6" ? [6] : [4];
}

/**
 * How `load` fits each family's table of this host (thresholds from /proc/sys, entries from netlink). With
 * `existing` (a lab already up, growing to `load`), only the difference is needed: the table's current
 * entries hold the existing lab's.
 */
export function hostFits(load: NeighLoad, families: (4 | 6)[], existing?: NeighLoad): NeighFit[] {
  return families.map((f) => {
    const t = hostNeighTable(f);
    const th: GcThresholds = hostThresholds(f) ??
      (t ? { gcThresh1: t.gcThresh1, gcThresh2: t.gcThresh2, gcThresh3: t.gcThresh3 } : {
        gcThresh1: 128,
        gcThresh2: 512,
        gcThresh3: 1024,
      });
    return neighFit(needFor(load, f, existing), countedEntries(f) ?? 0, th);
  });
}

/** The need of `load`, less that of `existing` (component by component) when given. */
export function needFor(load: NeighLoad, family: 4 | 6, existing?: NeighLoad, release?: string): NeighNeed {
  const a = labNeighNeed(load, family, release);
  if (!existing) return a;
  const b = labNeighNeed(existing, family, release);
  const d = (k: keyof Omit<NeighNeed, "family">) => Math.max(0, a[k] - b[k]);
  return {
    family,
    underlay: d("underlay"),
    overlay: d("overlay"),
    pods: d("pods"),
    store: d("store"),
    margin: d("margin"),
    counted: d("counted"),
    total: d("total"),
  };
}

/** The refusal text: the numbers of each table that does not fit, the sysctl lines, and --tune-host. */
export function refusal(what: string, fits: NeighFit[]): string {
  const bad = fits.filter((f) => !f.fits);
  const kv = bad.flatMap((f) => sysctlPairs(f.family, f.recommended, f.thresholds));
  return [
    `${what} does not fit the host's neighbour table${
      bad.length > 1 ? "s" : ""
    } (shared by every namespace):`,
    ...bad.map((f) => `  ${describeFit(f)} > gc_thresh3`),
    "raise the thresholds (host-wide, as root) and run it again:",
    `  sysctl -w ${kv.join(" ")}`,
    "or pass --tune-host to raise them for the lab's lifetime (lab down restores them)",
  ].join("\n");
}

/** Notes for tables that fit but will be past gc_thresh2 (forced collection every 5 s). */
export function fitNotes(fits: NeighFit[]): string[] {
  return fits.filter((f) => f.fits && f.pastThresh2).map((f) =>
    `note: ${describeFit(f)}: past gc_thresh2, the kernel will force garbage collection (idle entries ` +
    `re-resolved); --tune-host raises the thresholds`
  );
}

/** The changes that bring every table to its recommended thresholds (only raises). */
export function tuningFor(fits: NeighFit[]): HostTuning[] {
  const out: HostTuning[] = [];
  for (const f of fits) {
    // gc_thresh3 first when raising, so the three stay ordered at every step.
    for (const w of [3, 2, 1] as const) {
      const k = `gcThresh${w}` as const;
      if (f.recommended[k] > f.thresholds[k]) {
        out.push({
          key: gcKey(f.family, w),
          path: gcPath(f.family, w),
          before: f.thresholds[k],
          after: f.recommended[k],
        });
      }
    }
  }
  return out;
}

/** Applies `changes` (recorded in `s` first). Returns one line per change. */
export function applyTuning(s: LabState, changes: HostTuning[]): string[] {
  s.hostTuning = [...(s.hostTuning ?? []), ...changes];
  saveState(s);
  return changes.map((c) => {
    Deno.writeTextFileSync(c.path, `${c.after}\n`);
    return `--tune-host: ${c.key} ${c.before} -> ${c.after} (lab down restores ${c.before})`;
  });
}

/**
 * Restores what `s` changed (lab down): a value someone changed since is left alone. When labs still up
 * hold more entries than the old thresholds allow (the entries the collector counts, once this lab's
 * deleted namespaces are torn down — waited for up to `settleMs` — above the old gc_thresh2), the record moves to one of them (its down restores) and the values stay.
 * `entries` reads a family's table (tests give their own). Returns one line per change.
 */
export async function restoreTuning(
  s: LabState,
  entries: (family: 4 | 6) => number | null = (f) => countedEntries(f),
  settleMs = 15_000,
): Promise<string[]> {
  const changes = s.hostTuning ?? [];
  if (!changes.length) return [];
  const famOf = (c: HostTuning) => (c.key.startsWith("net.ipv6.") ? 6 : 4) as 4 | 6;
  const crowded = () =>
    changes.some((c) => {
      if (!c.key.endsWith("gc_thresh2")) return false;
      const e = entries(famOf(c));
      return e !== null && e > c.before;
    });
  // A deleted namespace is torn down by the kernel a moment later (its entries with it): wait for that.
  const end = Date.now() + settleMs;
  let full = crowded();
  while (full && Date.now() < end) {
    await sleep(250);
    full = crowded();
  }
  const heir = full ? otherLab(s.name) : null;
  if (heir) {
    heir.hostTuning = [...(heir.hostTuning ?? []), ...changes];
    saveState(heir);
    return [
      `host neighbour thresholds stay raised: the table still holds more than the old gc_thresh2 while lab ` +
      `${heir.name} is up (its lab down restores them)`,
    ];
  }
  const lines: string[] = [];
  for (const c of [...changes].reverse()) {
    let now: number | null = null;
    try {
      now = Number(Deno.readTextFileSync(c.path).trim());
    } catch { /* unreadable */ }
    if (now !== c.after) {
      lines.push(`${c.key} is ${now ?? "unreadable"}, not the ${c.after} lab up set: left as is`);
      continue;
    }
    try {
      Deno.writeTextFileSync(c.path, `${c.before}\n`);
      lines.push(`${c.key} restored to ${c.before}`);
    } catch (e) {
      lines.push(
        `${c.key}: cannot restore ${c.before} (${(e as Error).message}); run: sysctl -w ${c.key}=${c.before}`,
      );
    }
  }
  return lines;
}

/** Another lab with a readable state, or null. */
function otherLab(name: string): LabState | null {
  try {
    for (const e of Deno.readDirSync(labRoot())) {
      if (!e.isDirectory || e.name === name) continue;
      try {
        const s = readState(e.name);
        if (s) return s;
      } catch { /* corrupt: not an heir */ }
    }
  } catch { /* no root */ }
  return null;
}

/** Checks a lab of `load` against the host; throws {@link LabTooBigError} when it does not fit. */
export function checkHostFits(
  what: string,
  load: NeighLoad,
  families: (4 | 6)[],
  tune: boolean,
  existing?: NeighLoad,
): NeighFit[] {
  const fits = hostFits(load, families, existing);
  if (!tune && fits.some((f) => !f.fits)) throw new LabTooBigError(refusal(what, fits));
  return fits;
}
