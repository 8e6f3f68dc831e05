/**
 * The command tree. Each subcommand lives in its own file under cli/ and exports `register(program)`;
 * heavy modules are imported inside the actions so `--help` stays fast and needs no libnl.
 * @module
 */
import { Command, CommanderError } from "commander";
import { FlanctlError } from "../lib/base/errors.ts";
import { VERSION } from "../lib/base/version.ts";
import { ExitStatus } from "./exit.ts";
import { captureUsageErrors, usageMessage } from "./usage.ts";
import { register as registerInspect } from "./inspect.ts";
import { register as registerLease } from "./lease.ts";
import { register as registerDaemon } from "./daemon.ts";
import { register as registerCni } from "./cni.ts";
import { register as registerDoctor } from "./doctor.ts";
import { register as registerLab } from "./lab.ts";
import { register as registerTrace } from "./trace.ts";
import { register as registerStatus } from "./status.ts";
import { register as registerCompletion } from "./completion.ts";
import { INSPECT_KINDS } from "./inspect.ts";
import { register as registerInstallCni } from "./install_cni.ts";
import { register as registerReset } from "./reset.ts";

/** Builds the command tree (exported for tests). */
export function buildProgram(): Command {
  const program = new Command("flanctl")
    .description("flannel-compatible container networking: daemon, CNI plugins, leases, inspect, doctor, lab")
    .version(VERSION, "-V, --version")
    .exitOverride()
    .configureOutput({ writeErr: (s) => Deno.stderr.writeSync(new TextEncoder().encode(s)) });
  registerInspect(program);
  registerLease(program);
  registerDaemon(program);
  registerCni(program);
  registerDoctor(program);
  registerLab(program);
  registerTrace(program);
  registerStatus(program);
  registerReset(program);
  registerCompletion(program, {
    args: { "flanctl inspect": INSPECT_KINDS, "flanctl completion": ["bash", "zsh", "fish"] },
    options: { "--output": ["table", "json"] },
  });
  registerInstallCni(program);
  for (const c of program.commands) c.exitOverride();
  failedCommand = captureUsageErrors(program);
  return program;
}

/** The command whose usage error is being reported (set by {@link buildProgram}). */
let failedCommand: () => Command | null = () => null;

/** Turns any error into a message on stderr and an exit code (2 for usage errors). */
export function reportError(e: unknown): number {
  if (e instanceof ExitStatus) return e.code;
  if (e instanceof CommanderError) {
    if (
      e.code === "commander.helpDisplayed" || e.code === "commander.version" || e.code === "commander.help"
    ) {
      return 0;
    }
    if (e.exitCode === 0) return 0;
    console.error(usageMessage(e, failedCommand()));
    return 2;
  }
  if (e instanceof FlanctlError) {
    console.error(`flanctl: ${e.message}`);
    return e.exitCode;
  }
  console.error(`flanctl: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  return 1;
}

/** Runs the CLI and returns the exit code (an action ends non-zero by throwing cli/exit.ts's ExitStatus). */
export async function main(args: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(args, { from: "user" });
    return 0;
  } catch (e) {
    return reportError(e);
  }
}
