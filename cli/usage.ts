/**
 * One format for every usage error: `flanctl: <flag>: <problem>; <hint>`, exit 2. Commander's own errors
 * (unknown option or command, missing or invalid value, extra arguments) are rewritten into it: the
 * error's code says which kind it is, and the flag or argument it names is taken from commander's message
 * (commander passes it nowhere else); the hint points at the failing command's `--help`.
 * @module
 */
import type { Command, CommanderError } from "commander";

/** The full name of `c` as typed (`flanctl lease list`). */
export function commandPath(c: Command | null): string {
  const names: string[] = [];
  for (let x: Command | null = c; x; x = x.parent) names.unshift(x.name());
  return names.join(" ") || "flanctl";
}

/**
 * Makes every command of `program` report its usage errors through {@link usageMessage}: commander's
 * own printing is silenced and the failing command recorded. Returns a function giving the command that
 * failed last (null before any failure).
 */
export function captureUsageErrors(program: Command): () => Command | null {
  let failed: Command | null = null;
  const walk = (c: Command) => {
    c.showHelpAfterError(false);
    c.configureOutput({ outputError: () => void (failed = c) });
    c.commands.forEach(walk);
  };
  walk(program);
  return () => failed;
}

const quoted = (s: string) => [...s.matchAll(/'([^']*)'/g)].map((m) => m[1]);

/** Edit distance (insert, delete, substitute, swap of neighbours), for flag suggestions. */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.length][b.length];
}

/**
 * The option of `cmd` closest to `typed`, hidden ones included (commander suggests only options its help
 * shows, and the shared store flags are listed in one place only), or undefined when none is close.
 */
export function suggestOption(cmd: Command | null, typed: string): string | undefined {
  if (!cmd || !typed.startsWith("--")) return undefined;
  let best: { flag: string; d: number } | undefined;
  for (const o of cmd.options) {
    if (!o.long) continue;
    const d = distance(typed, o.long);
    if (d <= Math.max(1, Math.floor(o.long.length / 4)) && (!best || d < best.d)) best = { flag: o.long, d };
  }
  return best?.flag;
}

/** The `flanctl: <flag>: <problem>; <hint>` line for commander error `e` raised by command `cmd`. */
export function usageMessage(e: CommanderError, cmd: Command | null): string {
  const path = commandPath(cmd);
  const help = `see '${path} --help'`;
  const raw = e.message.replace(/^error: /, "");
  const [first, ...rest] = raw.split("\n");
  const didYouMean = /\(Did you mean (.+)\?\)/.exec(rest.join(" "))?.[1];
  const hint = didYouMean ? `did you mean ${didYouMean}? ${help}` : help;
  const q = quoted(first);
  const flag = (spec: string | undefined) => (spec ?? "").split(/[ ,]/)[0] || "argument";
  switch (e.code) {
    case "commander.unknownOption": {
      const near = didYouMean ? undefined : suggestOption(cmd, q[0] ?? "");
      return `flanctl: ${q[0]}: unknown option; ${near ? `did you mean ${near}? ${help}` : hint}`;
    }
    case "commander.unknownCommand":
      return `flanctl: ${q[0]}: unknown command; ${hint}`;
    case "commander.missingArgument":
      return `flanctl: ${q[0]}: missing argument; ${help}`;
    case "commander.optionMissingArgument":
      return `flanctl: ${flag(q[0])}: needs a value (${
        q[0]?.split(" ").slice(1).join(" ") || "a value"
      }); ${help}`;
    case "commander.missingMandatoryOptionValue":
      return `flanctl: ${flag(q[0])}: required; ${help}`;
    case "commander.invalidArgument": {
      // "option '--backend <type>' argument 'udp' is invalid. Allowed choices are vxlan, host-gw."
      const choices = /Allowed choices are (.+)\.$/.exec(first)?.[1];
      const what = first.startsWith("option") ? flag(q[0]) : q[1] ?? q[0] ?? "argument";
      const value = first.startsWith("option") ? q[1] : q[0];
      const problem = first.replace(/^.*?is invalid\.?\s*/, "").replace(/Allowed choices are .+$/, "").trim();
      return `flanctl: ${what}: '${value}' is invalid${problem ? ` (${problem})` : ""}; ${
        choices ? `use one of ${choices}` : help
      }`;
    }
    case "commander.excessArguments": {
      // "too many arguments for 'inspect'. Expected 1 argument but got 2: a, b."
      const m = /Expected (\d+) arguments? but got \d+: (.+)\.$/.exec(first);
      const extra = m ? m[2].split(", ").slice(Number(m[1])).join(" ") : "";
      return `flanctl: ${extra || "arguments"}: unexpected argument; ${help}`;
    }
    default:
      return `flanctl: ${path}: ${first}; ${help}`;
  }
}
