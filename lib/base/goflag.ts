/**
 * A command-line parser with Go's `flag` package syntax (what flanneld uses), driven by a declarative table
 * of {@link FlagSpec}s: `-flag`, `--flag`, `-flag=value`, `--flag=value`, `-flag value` (not for booleans),
 * `--bool=false`; parsing stops at `--`. Values are taken verbatim (never split on commas: a repeatable
 * flag is given once per value). Every flag not given on the command line is then read from its
 * environment variable (`FLANNELD_<NAME>` unless the table says otherwise; empty values are ignored, as
 * flanneld's flagutil does).
 *
 * Written by hand rather than with an npm parser: the daemon path must not load commander (start-up and
 * RSS, see bench/daemon_bench.ts), and no package parses Go's syntax (single dash long flags, bool only
 * with `=`).
 * @module
 */
import { UsageError } from "./errors.ts";

/** How a flag's value is read. `list` is repeatable (one value per occurrence). */
export type FlagKind = "string" | "bool" | "int" | "list";

/** One flag of a table. */
export interface FlagSpec {
  /** The name without dashes, as flanneld spells it (`iface-regex`, `log_backtrace_at`, `v`). */
  name: string;
  kind: FlagKind;
  /** One-line help. */
  help: string;
  /** Default value (none: the key stays undefined unless given). */
  default?: string | number | boolean;
  /** Environment variable; default `FLANNELD_<NAME>` (upper case, `-` → `_`); null = none. */
  env?: string | null;
  /** Where the flag comes from (help grouping): flanneld's own, glog's, or flanctl's addition. */
  origin: "flanneld" | "glog" | "flanctl";
  /** Placeholder in help (`<ip>`). */
  arg?: string;
  /** Integer range (inclusive). */
  min?: number;
  max?: number;
  /** Allowed string values. */
  choices?: readonly string[];
  /** Not shown in help (test and lab knobs). */
  hidden?: boolean;
}

/** Where a value came from. */
export type FlagSource = "cli" | "env" | "default";

/** The result of {@link parseGoFlags}. Values are keyed by {@link flagKey}. */
export interface ParsedFlags {
  values: Record<string, unknown>;
  source: Record<string, FlagSource>;
  /** `-h`/`--help`/`-help` was given. */
  help: boolean;
}

/** The key of a flag in {@link ParsedFlags.values}: camelCase (`healthz-ip` → `healthzIp`, `log_backtrace_at` → `logBacktraceAt`). */
export function flagKey(name: string): string {
  return name.replace(/[-_]([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** The environment variable of a flag (null: none). */
export function flagEnv(spec: FlagSpec): string | null {
  if (spec.env !== undefined) return spec.env;
  return "FLANNELD_" + spec.name.toUpperCase().replace(/-/g, "_");
}

/** Go's strconv.ParseBool; null when the text is not a boolean. */
export function goBool(s: string): boolean | null {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(s)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(s)) return false;
  return null;
}

function dash(spec: FlagSpec): string {
  return spec.name.length === 1 ? `-${spec.name}` : `--${spec.name}`;
}

/** Converts one textual value of `spec`; `from` names the origin for the error (`--x` or `FLANNELD_X`). */
function convert(spec: FlagSpec, raw: string, from: string): unknown {
  const where = from === dash(spec) ? from : `${dash(spec)} (from ${from})`;
  switch (spec.kind) {
    case "bool": {
      const b = goBool(raw);
      if (b === null) throw new UsageError(`${where}: '${raw}' is not a boolean; use true or false`);
      return b;
    }
    case "int": {
      const n = /^[+-]?\d+$/.test(raw) ? Number(raw) : NaN;
      const lo = spec.min ?? Number.MIN_SAFE_INTEGER, hi = spec.max ?? Number.MAX_SAFE_INTEGER;
      if (!Number.isSafeInteger(n) || n < lo || n > hi) {
        const range = spec.min !== undefined || spec.max !== undefined ? ` from ${lo} to ${hi}` : "";
        throw new UsageError(`${where}: '${raw}' is not an integer${range}; give a whole number${range}`);
      }
      return n;
    }
    default:
      if (spec.choices && !spec.choices.includes(raw)) {
        throw new UsageError(`${where}: '${raw}' is not valid; use one of ${spec.choices.join(", ")}`);
      }
      return raw;
  }
}

function set(out: ParsedFlags, spec: FlagSpec, v: unknown, src: FlagSource): void {
  const k = flagKey(spec.name);
  if (spec.kind === "list") {
    const prev = out.source[k] === src ? out.values[k] as string[] : [];
    out.values[k] = [...prev, v as string];
  } else out.values[k] = v;
  out.source[k] = src;
}

/** Edit distance, for "did you mean". */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
  }
  return d[a.length][b.length];
}

function unknownFlag(name: string, specs: readonly FlagSpec[], cmd: string): UsageError {
  const near = specs.filter((s) => !s.hidden).map((s) => [s, distance(name, s.name)] as const)
    .filter(([, n]) => n <= 2).sort((a, b) => a[1] - b[1])[0];
  const hint = near ? `did you mean ${dash(near[0])}?` : `see '${cmd} --help'`;
  return new UsageError(`-${name.length === 1 ? "" : "-"}${name}: unknown flag; ${hint}`);
}

/**
 * Parses `argv` with Go flag syntax against `specs`, then fills the rest from `env`, then the defaults.
 * Throws {@link UsageError} (`<flag>: <problem>; <hint>`) on an unknown flag, a missing or bad value, or a
 * positional argument. `cmd` names the command in hints.
 */
export function parseGoFlags(
  specs: readonly FlagSpec[],
  argv: readonly string[],
  env: Record<string, string | undefined>,
  cmd = "flanctl daemon",
): ParsedFlags {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const out: ParsedFlags = { values: {}, source: {}, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      if (i + 1 < argv.length) {
        throw new UsageError(`${argv[i + 1]}: unexpected argument; ${cmd} takes flags only`);
      }
      break;
    }
    if (arg.length < 2 || arg[0] !== "-") {
      const prev = byName.get(argv[i - 1]?.replace(/^--?/, "") ?? "");
      const hint = prev?.kind === "bool" && goBool(arg) !== null
        ? `a boolean flag takes its value after '=' (${dash(prev)}=${arg})`
        : `${cmd} takes flags only`;
      throw new UsageError(`${arg}: unexpected argument; ${hint}`);
    }
    const body = arg.slice(arg[1] === "-" ? 2 : 1);
    if (body === "" || body[0] === "-" || body[0] === "=") {
      throw new UsageError(`${arg}: bad flag syntax; write -flag, --flag or --flag=value`);
    }
    const eq = body.indexOf("=");
    const name = eq < 0 ? body : body.slice(0, eq);
    if (name === "h" || name === "help") {
      out.help = true;
      continue;
    }
    const spec = byName.get(name);
    if (!spec) throw unknownFlag(name, specs, cmd);
    let raw: string;
    if (eq >= 0) raw = body.slice(eq + 1);
    else if (spec.kind === "bool") raw = "true";
    else {
      if (i + 1 >= argv.length) {
        throw new UsageError(`${dash(spec)}: needs a value; write ${dash(spec)} ${spec.arg ?? "VALUE"}`);
      }
      raw = argv[++i];
    }
    set(out, spec, convert(spec, raw, dash(spec)), "cli");
  }
  for (const spec of specs) {
    const k = flagKey(spec.name);
    if (out.source[k] === "cli") continue;
    const e = flagEnv(spec);
    const raw = e === null ? undefined : env[e];
    if (raw !== undefined && raw !== "") set(out, spec, convert(spec, raw, e!), "env");
    else if (spec.default !== undefined) {
      out.values[k] = spec.default;
      out.source[k] = "default";
    } else if (spec.kind === "list") {
      out.values[k] = [];
      out.source[k] = "default";
    }
  }
  return out;
}

/** `text` as lines of at most `width` columns (a longer word stands alone), each starting with `indent`. */
export function wrapText(text: string, indent: string, width: number): string[] {
  const out: string[] = [];
  let line = "";
  for (const w of text.split(/\s+/).filter(Boolean)) {
    if (line && indent.length + line.length + 1 + w.length > width) {
      out.push(indent + line);
      line = w;
    } else line = line ? `${line} ${w}` : w;
  }
  if (line) out.push(indent + line);
  return out;
}

/**
 * Renders `specs` as help text: one block per flag with its env variable and default, the description
 * wrapped to `width` columns (80, as commander wraps every other command's help off a terminal).
 */
export function renderFlagHelp(
  specs: readonly FlagSpec[],
  groups: Record<FlagSpec["origin"], string>,
  width = 80,
): string {
  const lines: string[] = [];
  for (const origin of ["flanneld", "flanctl", "glog"] as const) {
    const shown = specs.filter((s) => s.origin === origin && !s.hidden);
    if (!shown.length) continue;
    lines.push("", groups[origin]);
    for (const s of shown) {
      const val = s.kind === "bool" ? "[=true|false]" : ` ${s.arg ?? (s.kind === "int" ? "<n>" : "<value>")}`;
      lines.push(`  ${dash(s)}${val}`);
      const extra: string[] = [];
      if (s.default !== undefined && s.default !== "") extra.push(`default ${s.default}`);
      if (s.kind === "list") extra.push("repeatable");
      const e = flagEnv(s);
      if (e) extra.push(`env ${e}`);
      lines.push(...wrapText(`${s.help}${extra.length ? ` (${extra.join("; ")})` : ""}`, "      ", width));
    }
  }
  return lines.join("\n") + "\n";
}
