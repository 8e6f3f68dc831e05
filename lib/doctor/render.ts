/**
 * Output of `flanctl doctor`: a one-line summary, then problems (critical first) with what was seen, why
 * it matters and the fix, then one line per passing check. `-o json` is {@link DoctorJson}, an explicit
 * view (the contract), never the internal report printed as it is.
 * @module
 */
import type { DoctorReport, Finding, Summary } from "./types.ts";
import { escapeControl } from "../base/ui/table.ts";

/** Most fix lines printed per finding in the table. */
const MAX_FIX_LINES = 12;

const LABEL = { critical: "CRITICAL", warning: "WARNING", unknown: "UNKNOWN", ok: "OK" } as const;
/** ANSI colours of the severity labels (only on a terminal, see {@link RenderOptions.color}). */
const COLOUR = { critical: "\x1b[1;31m", warning: "\x1b[33m", unknown: "\x1b[35m", ok: "\x1b[32m" } as const;

/** How the table is drawn. */
export interface RenderOptions {
  /** Colour the severity labels (the CLI sets it only when stdout is a terminal and NO_COLOR is unset). */
  color?: boolean;
  /** Only what is not ok (`--problems`); the summary line still counts everything. */
  problemsOnly?: boolean;
}

/** The one-line summary. */
export function summaryLine(r: DoctorReport): string {
  const s = r.summary;
  const where = s.netns ? ` (netns ${s.netns})` : "";
  const skipped = s.skipped.length ? `, skipped ${s.skipped.join(",")}` : "";
  return escapeControl(
    `DOCTOR ${s.status}: ${s.critical} critical, ${s.warning} warning, ${s.unknown} unknown, ${s.ok} ok` +
      `${where}${skipped}`,
  );
}

function block(raw: Finding, idWidth: number, color = false): string[] {
  // Values from the kernel, store and files reach details and fix lines: no control byte reaches the terminal.
  const f: Finding = {
    ...raw,
    detail: escapeControl(raw.detail),
    why: raw.why === undefined || raw.why === null ? raw.why : escapeControl(raw.why),
    fix: raw.fix?.map(escapeControl),
    persist: raw.persist?.map(escapeControl),
  };
  const label = LABEL[f.severity].padEnd(8);
  const head = `${label}  ${f.id.padEnd(idWidth)}  `;
  const lead = color ? `${COLOUR[f.severity]}${label}\x1b[0m  ${f.id.padEnd(idWidth)}  ` : head;
  if (f.severity === "ok" || f.severity === "unknown") {
    const lines = [lead + f.detail];
    for (const x of f.fix ?? []) lines.push(`${" ".repeat(head.length)}hint: ${x}`);
    return lines;
  }
  const pad = " ".repeat(10);
  // Multi-part details ("a; b; c") get one line per part, aligned under the first.
  const [first, ...more] = f.detail.split("; ");
  const lines = [lead + first, ...more.map((m) => " ".repeat(head.length) + m)];
  if (f.why) lines.push(`${pad}why:     ${f.why}`);
  // Long fix lists (hundreds of leaked files) are cut in the table; `-o json` has them all.
  const fix = f.fix ?? [];
  const shown = fix.length > MAX_FIX_LINES ? fix.slice(0, MAX_FIX_LINES - 1) : fix;
  shown.forEach((x, i) => lines.push(`${pad}${i === 0 ? "fix:    " : "        "} ${x}`));
  if (shown.length < fix.length) {
    lines.push(`${pad}         … ${fix.length - shown.length} more (see -o json)`);
  }
  (f.persist ?? []).forEach((x, i) => lines.push(`${pad}${i === 0 ? "persist:" : "        "} ${x}`));
  return lines;
}

/** Human-readable report. */
export function renderTable(r: DoctorReport, o: RenderOptions = {}): string {
  const checks = o.problemsOnly ? r.checks.filter((f) => f.severity !== "ok") : r.checks;
  const idWidth = Math.max(0, ...checks.map((f) => f.id.length));
  const out = [summaryLine(r)];
  const problems = checks.filter((f) => f.severity === "critical" || f.severity === "warning");
  const rest = checks.filter((f) => f.severity === "unknown" || f.severity === "ok");
  if (problems.length) {
    out.push("");
    for (const f of problems) out.push(...block(f, idWidth, o.color), "");
    out.pop();
  }
  if (rest.length) {
    out.push("");
    for (const f of rest) out.push(...block(f, idWidth, o.color));
  }
  return out.join("\n") + "\n";
}

/** `flanctl doctor -o json`: the contract (docs/doctor.md, pinned by lib/doctor/render_test.ts). */
export interface DoctorJson {
  /** These keys of the report's summary, in this order. */
  summary: Pick<
    Summary,
    "status" | "ok" | "warning" | "critical" | "unknown" | "skipped" | "exitCode" | "netns"
  >;
  checks: {
    id: string;
    severity: Finding["severity"];
    detail: string;
    fix: string[];
    why: string | null;
    persist: string[];
    /** Present (true) on a finding that explains others (theirs say "consequence of"). */
    rootCause?: true;
  }[];
}

/** `-o json`: `{"summary":{"status","ok","warning","critical","unknown","skipped","exitCode","netns"},"checks":[…]}`. */
export function renderJson(r: DoctorReport, o: { problemsOnly?: boolean } = {}): string {
  const checks = o.problemsOnly ? r.checks.filter((f) => f.severity !== "ok") : r.checks;
  const s = r.summary;
  return JSON.stringify(
    {
      summary: {
        status: s.status,
        ok: s.ok,
        warning: s.warning,
        critical: s.critical,
        unknown: s.unknown,
        skipped: s.skipped,
        exitCode: s.exitCode,
        netns: s.netns,
      },
      checks: checks.map((f) => ({
        id: f.id,
        severity: f.severity,
        detail: f.detail,
        fix: f.fix ?? [],
        why: f.why ?? null,
        persist: f.persist ?? [],
        ...(f.rootCause ? { rootCause: true as const } : {}),
      })),
    } satisfies DoctorJson,
    null,
    2,
  ) + "\n";
}
