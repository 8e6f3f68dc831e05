/**
 * One line per event, logfmt style (`level=info msg="lease acquired" subnet=10.244.1.0/24`), on stderr so
 * journald captures it with its own timestamp. Hand-written: a logger package would add a dependency for
 * twenty lines.
 * @module
 */

/** Log levels in increasing severity. */
export type LogLevel = "debug" | "info" | "warn" | "error";

const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/** Extra key/value fields of a log line. */
export type LogFields = Record<string, string | number | boolean | null | undefined>;

function quote(v: string): string {
  return /^[A-Za-z0-9_.:/@+\-,]+$/.test(v) ? v : JSON.stringify(v);
}

/** Formats one logfmt line (without newline). Exported for tests. */
export function formatLine(level: LogLevel, msg: string, fields: LogFields = {}, time?: Date): string {
  const parts: string[] = [];
  if (time) parts.push(`time=${time.toISOString()}`);
  parts.push(`level=${level}`, `msg=${quote(msg)}`);
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    parts.push(`${k}=${quote(String(v))}`);
  }
  return parts.join(" ");
}

/**
 * The one logger shape library code takes: a method per level, each a message and logfmt fields. The
 * daemon's {@link Logger} is one; a caller that must not log passes {@link quietLog}. A module that needs
 * only some levels takes `Pick<Log, ...>`, so a test can hand it a small fake.
 */
export interface Log {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

/** A {@link Log} that drops everything. */
export const quietLog: Log = { debug() {}, info() {}, warn() {}, error() {} };

/** A leveled logfmt logger writing to stderr (or a supplied sink). */
export class Logger implements Log {
  #min: number;
  #sink: (line: string) => void;
  #withTime: boolean;

  constructor(
    opts: { level?: LogLevel; sink?: (line: string) => void; time?: boolean } = {},
  ) {
    this.#min = RANK[opts.level ?? "info"];
    const enc = new TextEncoder();
    this.#sink = opts.sink ?? ((l) => {
      try {
        Deno.stderr.writeSync(enc.encode(l + "\n"));
      } catch { /* stderr closed: nothing to do */ }
    });
    // journald timestamps lines itself; outside systemd a timestamp helps.
    this.#withTime = opts.time ?? !Deno.env.get("JOURNAL_STREAM");
  }

  /** Logs at `level` when it is at or above the configured minimum. */
  log(level: LogLevel, msg: string, fields?: LogFields): void {
    if (RANK[level] < this.#min) return;
    this.#sink(formatLine(level, msg, fields, this.#withTime ? new Date() : undefined));
  }
  /** Debug line. */
  debug(msg: string, fields?: LogFields): void {
    this.log("debug", msg, fields);
  }
  /** Info line. */
  info(msg: string, fields?: LogFields): void {
    this.log("info", msg, fields);
  }
  /** Warning line. */
  warn(msg: string, fields?: LogFields): void {
    this.log("warn", msg, fields);
  }
  /** Error line. */
  error(msg: string, fields?: LogFields): void {
    this.log("error", msg, fields);
  }
}
