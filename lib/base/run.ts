/**
 * The one process runner: runs a command to completion, asynchronously, with optional stdin text, extra
 * environment, working directory and a timeout. A missing binary is a typed {@link CommandNotFoundError};
 * a non-zero exit is a result, not an error. Every caller (lab, doctor, firewall, bundle, CNI delegates,
 * benches) runs processes through here; {@link runAttached} runs one with the terminal attached (`lab exec`).
 * @module
 */
import { FlanctlError } from "./errors.ts";

/** The binary of a command does not exist (Deno.errors.NotFound from spawn). */
export class CommandNotFoundError extends FlanctlError {
  /** The command that was not found (argv[0]). */
  readonly command: string;
  constructor(command: string) {
    super(`${command}: not found`, 1);
    this.command = command;
  }
}

/** Options for {@link runProcess}. */
export interface RunOptions {
  /** Text written to the command's stdin (stdin is /dev/null without it). */
  stdin?: string;
  /** Variables added to (or overriding) the caller's environment. */
  env?: Record<string, string>;
  /** Working directory. */
  cwd?: string;
  /** Kill the command (SIGKILL) after this many milliseconds; the result then has `timedOut` true. */
  timeoutMs?: number;
  /** Discard stdout and stderr instead of collecting them. */
  discardOutput?: boolean;
  /**
   * The command's stderr goes to this process's stderr instead of being collected (`stderr` is then ""):
   * a CNI delegate's diagnostics belong to the runtime that called us.
   */
  inheritStderr?: boolean;
}

/** Result of a finished command. */
export interface ProcResult {
  code: number;
  stdout: string;
  stderr: string;
  /** True when the command was killed because `timeoutMs` passed. */
  timedOut: boolean;
}

/**
 * Runs `cmd` to completion. Throws {@link CommandNotFoundError} when `cmd[0]` does not exist; never throws
 * for a non-zero exit.
 */
export async function runProcess(cmd: string[], opts: RunOptions = {}): Promise<ProcResult> {
  const out = opts.discardOutput ? "null" : "piped";
  let p: Deno.ChildProcess;
  try {
    p = new Deno.Command(cmd[0], {
      args: cmd.slice(1),
      stdin: opts.stdin !== undefined ? "piped" : "null",
      stdout: out,
      stderr: opts.inheritStderr ? "inherit" : out,
      env: opts.env,
      cwd: opts.cwd,
    }).spawn();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) throw new CommandNotFoundError(cmd[0]);
    throw e;
  }
  let timedOut = false;
  const timer = opts.timeoutMs === undefined ? undefined : setTimeout(() => {
    timedOut = true;
    try {
      p.kill("SIGKILL");
    } catch { /* already gone */ }
  }, opts.timeoutMs);
  try {
    // Output is collected while stdin is written (a tool that writes before it has read all its input
    // would block on a full pipe otherwise), and a tool that exits without reading its stdin (a usage
    // error, bad input on line 1) is a result with its own stderr, not a BrokenPipe from the write.
    const output = p.output();
    output.catch(() => {/* awaited below; this only keeps a failed stdin write from leaving it unhandled */});
    if (opts.stdin !== undefined) await writeStdin(p.stdin, opts.stdin);
    const o = await output;
    const dec = new TextDecoder();
    return {
      code: o.code,
      stdout: opts.discardOutput ? "" : dec.decode(o.stdout),
      stderr: opts.discardOutput || opts.inheritStderr ? "" : dec.decode(o.stderr),
      timedOut,
    };
  } finally {
    clearTimeout(timer);
  }
}

/** Writes `text` to a child's stdin and closes it; the child closing its end first is not an error. */
async function writeStdin(stdin: WritableStream<Uint8Array>, text: string): Promise<void> {
  const w = stdin.getWriter();
  try {
    await w.write(new TextEncoder().encode(text));
    await w.close();
  } catch (e) {
    if (!(e instanceof Deno.errors.BrokenPipe)) throw e;
    await w.abort().catch(() => {/* already closed */});
  }
}

/** How a command run by {@link runAttached} ended. */
export interface AttachedResult {
  code: number;
  /** The signal that ended it, or null. */
  signal: Deno.Signal | null;
}

/**
 * Runs `cmd` with this process's stdin, stdout and stderr (an interactive shell, a ping) and waits for it.
 * Ctrl-C belongs to the command: SIGINT is ignored here meanwhile, so this process waits for the command
 * instead of dying first and leaving it behind. Throws {@link CommandNotFoundError} when `cmd[0]` does not
 * exist.
 */
export async function runAttached(
  cmd: string[],
  opts: { env?: Record<string, string>; cwd?: string } = {},
): Promise<AttachedResult> {
  let p: Deno.ChildProcess;
  try {
    p = new Deno.Command(cmd[0], {
      args: cmd.slice(1),
      env: opts.env,
      cwd: opts.cwd,
      stdin: "inherit",
      stdout: "inherit",
      stderr: "inherit",
    }).spawn();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) throw new CommandNotFoundError(cmd[0]);
    throw e;
  }
  const ignore = () => {};
  Deno.addSignalListener("SIGINT", ignore);
  try {
    const st = await p.status;
    return { code: st.code, signal: st.signal };
  } finally {
    Deno.removeSignalListener("SIGINT", ignore);
  }
}
