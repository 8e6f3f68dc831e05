/**
 * Running commands for the lab: plain runs, runs inside a namespace, background processes that outlive
 * `lab up`, and the one place that decides how to run flanctl itself.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { runProcess as run } from "../base/run.ts";
import { sleep } from "../base/sleep.ts";

/** A command the lab ran that failed. Names the command and carries its stderr. */
export class LabCommandError extends FlanctlError {
  constructor(cmd: string[], code: number, stderr: string) {
    super(`'${cmd.join(" ")}' exited ${code}: ${stderr.trim().split("\n").slice(-5).join(" | ")}`, 1);
  }
}

/** Result of a command. */
export interface CmdResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to completion with the caller's environment plus `opts.env`; never throws on a non-zero
 * exit (a missing binary throws CommandNotFoundError). lib/base/run.ts's runner; the tests' `run` helper.
 */
export async function runProcess(
  cmd: string[],
  opts: { stdin?: string; env?: Record<string, string> } = {},
): Promise<CmdResult> {
  const { code, stdout, stderr } = await run(cmd, opts);
  return { code, stdout, stderr };
}

/** Runs a command to completion with NO_COLOR set; never throws on a non-zero exit. */
export function runCmd(
  cmd: string[],
  opts: { stdin?: string; env?: Record<string, string> } = {},
): Promise<CmdResult> {
  // Plain error text from child Deno processes (they colour stderr even when it is a pipe).
  return runProcess(cmd, { ...opts, env: { NO_COLOR: "1", ...opts.env } });
}

/** Runs a command and returns its stdout; throws {@link LabCommandError} on failure. */
export async function mustRun(
  cmd: string[],
  opts: { stdin?: string; env?: Record<string, string> } = {},
): Promise<string> {
  const r = await runCmd(cmd, opts);
  if (r.code !== 0) throw new LabCommandError(cmd, r.code, r.stderr || r.stdout);
  return r.stdout;
}

/** `ip netns exec NS cmd…` as an argv. */
export function inNs(netns: string, cmd: string[]): string[] {
  return ["ip", "netns", "exec", netns, ...cmd];
}

/**
 * The argv that runs flanctl the way the user ran it: the compiled binary itself; the installed launcher
 * (install.sh's `<prefix>/bin/flanctl` when this code is its `<prefix>/lib/flanctl/src` copy); otherwise the
 * same Deno running this checkout's main.ts with the deno.json next to it, so npm imports resolve alike.
 */
export function flanctlCommand(): string[] {
  const exe = Deno.execPath();
  const base = exe.split("/").pop() ?? "";
  const main = new URL("../../main.ts", import.meta.url);
  if (!base.startsWith("deno") || main.protocol !== "file:") {
    // `deno compile` output: the executable is flanctl itself.
    return [exe];
  }
  const mainDir = main.pathname.slice(0, main.pathname.lastIndexOf("/"));
  if (mainDir.endsWith("/lib/flanctl/src")) {
    const launcher = `${mainDir.slice(0, -"/lib/flanctl/src".length)}/bin/flanctl`;
    try {
      if (Deno.readTextFileSync(launcher).includes(main.pathname)) return [launcher];
    } catch { /* not installed that way */ }
  }
  const cmd = [exe, "run", "-A", "--no-check", "--quiet"];
  const config = new URL("../../deno.json", import.meta.url).pathname;
  try {
    Deno.statSync(config);
    cmd.push("--config", config);
  } catch { /* no config next to main.ts */ }
  cmd.push(main.pathname);
  return cmd;
}

/** Quotes one word for /bin/sh. */
export function shq(s: string): string {
  return /^[A-Za-z0-9_.,:/=@+%-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * Starts `cmd` in the background in its own session (so Ctrl-C in the terminal and the end of `lab up`
 * leave it running), stdin from /dev/null, stdout+stderr appended to `log`. Returns its pid.
 */
export async function spawnDetached(
  cmd: string[],
  log: string,
  env: Record<string, string> = {},
): Promise<number> {
  const script = `${cmd.map(shq).join(" ")} </dev/null >>${shq(log)} 2>&1 & echo $!`;
  const out = await mustRun(["setsid", "sh", "-c", script], { env });
  const pid = Number(out.trim());
  if (!Number.isInteger(pid) || pid <= 0) throw new FlanctlError(`could not start ${cmd[0]}: no pid`, 1);
  return pid;
}

/** Reads /proc/PID/cmdline as words, or null when the process is gone or a zombie. */
export function procCmdline(pid: number): string[] | null {
  try {
    const s = Deno.readTextFileSync(`/proc/${pid}/cmdline`);
    if (s) return s.split("\0").filter((w) => w !== "");
    // Empty: a zombie, or a process in the middle of execve().
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return /\) [ZX] /.test(stat) ? null : [];
  } catch {
    return null;
  }
}

/**
 * True when `pid` is alive and its command line contains `marker` (so a recycled pid is not ours). A
 * process caught mid-exec (empty command line) is looked at again.
 */
export function isOurProcess(pid: number, marker: string): boolean {
  for (let i = 0; i < 50; i++) {
    const words = procCmdline(pid);
    if (words === null) return false;
    if (words.length) return words.some((w) => w.includes(marker));
    const until = Date.now() + 2;
    while (Date.now() < until) { /* brief spin: exec completes in microseconds */ }
  }
  return true;
}

/** Sends SIGTERM, waits up to `graceMs`, then SIGKILL; returns when the process is gone. */
export async function stopProcess(pid: number, marker: string, graceMs = 5000): Promise<void> {
  if (!isOurProcess(pid, marker)) return;
  try {
    Deno.kill(pid, "SIGTERM");
  } catch { /* gone */ }
  const end = Date.now() + graceMs;
  while (Date.now() < end) {
    if (procCmdline(pid) === null) return;
    await sleep(50);
  }
  try {
    Deno.kill(pid, "SIGKILL");
  } catch { /* gone */ }
  const end2 = Date.now() + 2000;
  while (Date.now() < end2 && procCmdline(pid) !== null) await sleep(20);
}

/** The one sleep (lib/base/sleep.ts), here for the lab's callers. */
export { sleep };
