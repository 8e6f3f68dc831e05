/**
 * Runs one extension command as flanneld's runCmd does (flannel pkg/backend/extension, v0.28.10): no
 * shell; the daemon's environment plus the command's variables; `stdin` followed by a newline on standard
 * input; standard output and error collected together and trimmed (Go's CombinedOutput, TrimSpace); a
 * failure described in Go's words (`exit status 3`, `signal: killed`, `exec: "x": executable file not found
 * in $PATH`). What flanctl adds: a timeout (the command is killed, SIGKILL, with
 * every process it started: it runs in a process group of its own), and a cap on the output kept
 * (the rest is read and dropped, so the command never blocks on a full pipe). A command that leaves a
 * background process holding its output open is not waited for past its own exit (flanneld would wait).
 * @module
 */
import { goTrimSpace } from "./expand.ts";

/** What one run ended with. */
export interface CommandResult {
  /** True when the command ran and exited 0. */
  ok: boolean;
  /** stdout and stderr together (in arrival order), trimmed, at most `maxOutputBytes` of it. */
  output: string;
  /** True when the output was longer than `maxOutputBytes` (what is past it is dropped). */
  truncated: boolean;
  /** Why it failed, as Go's os/exec says it (null when ok). */
  error: string | null;
  /** True when it was killed because the timeout passed. */
  timedOut: boolean;
  /** Milliseconds from start to end. */
  ms: number;
}

/** Options of {@link runExtensionCommand}. */
export interface RunCommandOptions {
  /** The command's whole environment (flanneld: the daemon's, plus the command's variables). */
  env: Record<string, string>;
  /** Written to standard input, then a newline (as flanneld). */
  stdin: string;
  /** Killed (SIGKILL) after this many milliseconds. */
  timeoutMs: number;
  /** The output kept (bytes). */
  maxOutputBytes: number;
  /** Stops a run early (the daemon is stopping): the command is killed. */
  signal?: AbortSignal;
}

/** Reads `s` into `sink` until its end or `stop` resolves. */
async function drain(
  s: ReadableStream<Uint8Array>,
  sink: (b: Uint8Array) => void,
  stop: Promise<void>,
): Promise<void> {
  const r = s.getReader();
  const stopped = stop.then(() => null);
  try {
    while (true) {
      const x = await Promise.race([r.read(), stopped]);
      if (x === null || x.done) return;
      sink(x.value);
    }
  } catch {
    /* the pipe broke: what was read is kept */
  } finally {
    r.cancel().catch(() => {});
  }
}

/** Go's words for a process that could not be started. */
function startError(name: string, e: unknown): string {
  if (e instanceof Deno.errors.NotFound) {
    return name.includes("/")
      ? `fork/exec ${name}: no such file or directory`
      : `exec: "${name}": executable file not found in $PATH`;
  }
  if (e instanceof Deno.errors.PermissionDenied) return `fork/exec ${name}: permission denied`;
  return `fork/exec ${name}: ${(e as Error).message}`;
}

/** Runs `argv` (already expanded, see ./expand.ts); never throws. */
export async function runExtensionCommand(argv: string[], o: RunCommandOptions): Promise<CommandResult> {
  const t0 = performance.now();
  const done = (r: Omit<CommandResult, "ms">): CommandResult => ({
    ...r,
    ms: Math.round(performance.now() - t0),
  });
  let p: Deno.ChildProcess;
  try {
    p = new Deno.Command(argv[0], {
      args: argv.slice(1),
      env: o.env,
      clearEnv: true,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      detached: true, // its own process group, so a kill reaches the processes it started too
    }).spawn();
  } catch (e) {
    return done({ ok: false, output: "", truncated: false, error: startError(argv[0], e), timedOut: false });
  }
  let timedOut = false;
  const kill = () => {
    try {
      Deno.kill(-p.pid, "SIGKILL"); // the group: a shell's children too, not only the shell
    } catch { /* already gone */ }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, o.timeoutMs);
  o.signal?.addEventListener("abort", kill, { once: true });
  const chunks: Uint8Array[] = [];
  let kept = 0, truncated = false;
  const sink = (b: Uint8Array) => {
    const room = o.maxOutputBytes - kept;
    if (b.length > room) truncated = true;
    if (room <= 0) return;
    const part = b.length > room ? b.subarray(0, room) : b;
    chunks.push(part.slice());
    kept += part.length;
  };
  // The readers stop a moment after the command exits: a background child of it may hold the pipes.
  let release = () => {};
  const stop = new Promise<void>((r) => release = r);
  const readers = Promise.all([drain(p.stdout, sink, stop), drain(p.stderr, sink, stop)]);
  const w = p.stdin.getWriter();
  w.write(new TextEncoder().encode(`${o.stdin}\n`)).then(() => w.close()).catch(() => {
    w.abort().catch(() => {});
  });
  const st = await p.status;
  clearTimeout(timer);
  o.signal?.removeEventListener("abort", kill);
  const grace = setTimeout(release, 500);
  await readers;
  clearTimeout(grace);
  release();
  const buf = new Uint8Array(kept);
  let at = 0;
  for (const c of chunks) {
    buf.set(c, at);
    at += c.length;
  }
  const output = goTrimSpace(new TextDecoder().decode(buf));
  if (st.success) return done({ ok: true, output, truncated, error: null, timedOut: false });
  const error = timedOut
    ? `timed out after ${o.timeoutMs} ms: signal: killed`
    : st.signal
    ? `signal: ${signalWord(st.signal)}`
    : `exit status ${st.code}`;
  return done({ ok: false, output, truncated, error, timedOut });
}

/** Go's name of a signal in `signal: …` (syscall.Signal.String). */
function signalWord(s: Deno.Signal): string {
  const words: Partial<Record<Deno.Signal, string>> = {
    SIGKILL: "killed",
    SIGTERM: "terminated",
    SIGINT: "interrupt",
    SIGHUP: "hangup",
    SIGSEGV: "segmentation fault",
    SIGABRT: "aborted",
    SIGPIPE: "broken pipe",
    SIGQUIT: "quit",
  };
  return words[s] ?? s;
}
