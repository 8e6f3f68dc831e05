/**
 * Where library code reports a warning: a callback the caller supplies (the daemon passes its logfmt
 * Logger, so its stderr is logfmt only). Library modules never print; {@link plainWarn} is the sink for
 * command-line callers that pass none, and the one place plain `flanctl: warning: …` lines come from.
 * @module
 */

/** Fields of a warning (logfmt key/values when the sink is the Logger). */
export type WarnFields = Record<string, string | number | boolean | undefined>;

/** A warning sink. */
export type Warn = (msg: string, fields?: WarnFields) => void;

/** Plain `flanctl: warning: MSG (k=v …)` on stderr: the sink of command-line callers. Never throws. */
export const plainWarn: Warn = (msg, fields = {}) => {
  const extra = Object.entries(fields).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${v}`);
  const line = `flanctl: warning: ${msg}${extra.length ? ` (${extra.join(" ")})` : ""}\n`;
  try {
    Deno.stderr.writeSync(new TextEncoder().encode(line));
  } catch { /* stderr closed */ }
};

/** Writes `line` as it is to stderr (the stores' retry lines, a fatal abort). Never throws. */
export function stderrLine(line: string): void {
  try {
    Deno.stderr.writeSync(new TextEncoder().encode(line + "\n"));
  } catch { /* stderr closed */ }
}

/** `warn`, passing each distinct message on once (for configs that are re-read often). */
export function warnOnce(warn: Warn): Warn {
  const seen = new Set<string>();
  return (msg, fields) => {
    if (seen.has(msg)) return;
    seen.add(msg);
    warn(msg, fields);
  };
}
