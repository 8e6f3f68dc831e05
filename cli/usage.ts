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
    case "commander.unknownOption":
      return `flanctl: ${q[0]}: unknown option; ${hint}`;
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
