/**
 * Shapes shared by every doctor check: severities, findings, the check interface and the report.
 * @module
 */
import type { NodeSnapshot } from "../observe/snapshot.ts";
import type { CheckId, FindingId } from "./ids.ts";

export type { CheckId, FindingId } from "./ids.ts";

/** How bad a finding is. `unknown` means the check could not run (the reason is in `detail`). */
export type Severity = "ok" | "warning" | "critical" | "unknown";

/** Sort order for output: critical first. */
export const SEVERITY_ORDER: Record<Severity, number> = { critical: 0, warning: 1, unknown: 2, ok: 3 };

/** One result of one check. A check may return several findings with the same id (e.g. one per peer). */
export interface Finding {
  /** Stable check id (skippable with `--skip`). */
  id: FindingId;
  /** How bad it is. */
  severity: Severity;
  /** What was seen, with exact values. */
  detail: string;
  /** Why it matters (empty for ok findings). */
  why?: string;
  /** Exact commands that fix it now (empty for ok findings). */
  fix?: string[];
  /** How to make the fix survive a reboot/restart. */
  persist?: string[];
  /** Set when this finding explains others (they are marked as its consequences); sorted first. */
  rootCause?: boolean;
}

/** A doctor check: a family module exports one or more of these. */
export interface Check {
  /** Stable id; also the id of its findings. */
  id: CheckId;
  /** One-line title for listings. */
  title: string;
  /**
   * Reads the node snapshot, and for itself what only it needs (files, the daemon's HTTP endpoints, the CRI
   * socket, nmcli, ethtool, a second neighbour-table read, pings with --probe: docs/doctor.md); never changes
   * anything.
   */
  run(ctx: NodeSnapshot): Finding[] | Promise<Finding[]>;
}

/** Counts per severity. */
export interface Summary {
  /** Overall status word: OK, WARNING, CRITICAL, UNKNOWN. */
  status: "OK" | "WARNING" | "CRITICAL" | "UNKNOWN";
  /** Findings that are ok. */
  ok: number;
  /** Warnings. */
  warning: number;
  /** Critical findings. */
  critical: number;
  /** Checks that could not tell. */
  unknown: number;
  /** Checks that were skipped with --skip. */
  skipped: CheckId[];
  /** Nagios exit code (0 ok, 1 warning, 2 critical, 3 could not check). */
  exitCode: number;
  /** Where the doctor looked (netns name, or null for the current one). */
  netns: string | null;
}

/** The `-o json` document. */
export interface DoctorReport {
  /** The counts and the overall status. */
  summary: Summary;
  /** Every finding, critical first. */
  checks: Finding[];
}

/** Convenience constructor for an ok finding. */
export function ok(id: CheckId, detail: string): Finding {
  return { id, severity: "ok", detail };
}

/** Convenience constructor for an unknown finding (the check could not run). */
export function unknown(id: CheckId, detail: string, fix: string[] = []): Finding {
  return { id, severity: "unknown", detail, fix };
}
