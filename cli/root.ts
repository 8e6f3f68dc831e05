/**
 * The command tree. Each subcommand lives in its own file under cli/ and exports `register(program)`;
 * heavy modules are imported inside the actions so `--help` stays fast and needs no libnl.
 * @module
 */
import { Command, CommanderError } from "commander";
import { FlanctlError } from "../lib/errors.ts";
import { VERSION } from "../lib/version.ts";
import { register as registerInspect } from "./inspect.ts";
import { register as registerLease } from "./lease.ts";
import { register as registerDaemon } from "./daemon.ts";
import { register as registerCni } from "./cni.ts";
import { register as registerDoctor } from "./doctor.ts";
import { register as registerLab } from "./lab.ts";
import { register as registerTrace } from "./trace.ts";
import { register as registerStatus } from "./status.ts";

/** Builds the command tree (exported for tests). */
export function buildProgram(): Command {
  const program = new Command("flanctl")
    .description("flannel-compatible container networking: daemon, CNI plugins, leases, inspect, doctor, lab")
    .version(VERSION, "-V, --version")
    .exitOverride()
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({ writeErr: (s) => Deno.stderr.writeSync(new TextEncoder().encode(s)) });
  registerInspect(program);
  registerLease(program);
  registerDaemon(program);
  registerCni(program);
  registerDoctor(program);
  registerLab(program);
  registerTrace(program);
  registerStatus(program);
  for (const c of program.commands) c.exitOverride();
  return program;
}

/** Turns any error into a message on stderr and an exit code (2 for usage errors). */
export function reportError(e: unknown): number {
  if (e instanceof CommanderError) {
    if (
      e.code === "commander.helpDisplayed" || e.code === "commander.version" || e.code === "commander.help"
    ) {
      return 0;
    }
    return e.exitCode === 0 ? 0 : 2;
  }
  if (e instanceof FlanctlError) {
    console.error(`flanctl: ${e.message}`);
    return e.exitCode;
  }
  console.error(`flanctl: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  return 1;
}

/** Runs the CLI and returns the exit code. Actions may set `process exit code` by returning normally. */
export async function main(args: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(args, { from: "user" });
    return exitCode.value;
  } catch (e) {
    return reportError(e);
  }
}

/** Actions that finish with a non-zero code without throwing (doctor's Nagios codes) set this. */
export const exitCode = { value: 0 };
