import { assert, assertEquals } from "../../../tests/assert.ts";
import { runExtensionCommand } from "./run.ts";

const opts = { env: { PATH: Deno.env.get("PATH")! }, stdin: "", timeoutMs: 10_000, maxOutputBytes: 1024 };

Deno.test("runExtensionCommand: env added, stdin plus a newline, stdout and stderr together, trimmed", async () => {
  const r = await runExtensionCommand(
    ["sh", "-c", 'printf "  %s|" "$SUBNET"; cat; printf "%s" "${HOME:+home}"; sleep 0.1; echo err >&2'],
    { ...opts, env: { SUBNET: "10.244.3.0/24", HOME: "/x", PATH: Deno.env.get("PATH")! }, stdin: '{"a":1}' },
  );
  assertEquals(r.error, null);
  assert(r.ok);
  assertEquals(r.output, '10.244.3.0/24|{"a":1}\nhomeerr');
});

Deno.test("runExtensionCommand: failures in Go's words, the output kept", async () => {
  const r = await runExtensionCommand(["sh", "-c", "echo bad; exit 3"], opts);
  assertEquals([r.ok, r.error, r.output, r.timedOut], [false, "exit status 3", "bad", false]);
  const k = await runExtensionCommand(["sh", "-c", "kill -TERM $$"], opts);
  assertEquals(k.error, "signal: terminated");
  const nf = await runExtensionCommand(["flanctl-no-such-command", "x"], opts);
  assertEquals(nf.error, 'exec: "flanctl-no-such-command": executable file not found in $PATH');
  const np = await runExtensionCommand(["/nonexistent/flanctl-x"], opts);
  assertEquals(np.error, "fork/exec /nonexistent/flanctl-x: no such file or directory");
});

/**
 * A timeout long past a shell's start (3-14 ms here at load 8) even on a loaded machine: the output written
 * before the kill is what the timeout tests check, and nothing tells the test when the timer is armed.
 */
const TIMEOUT_MS = 2_000;

Deno.test("runExtensionCommand: killed at the timeout", async () => {
  const r = await runExtensionCommand(["sh", "-c", "echo started; exec sleep 30"], {
    ...opts,
    timeoutMs: TIMEOUT_MS,
  });
  assertEquals([r.ok, r.timedOut, r.output], [false, true, "started"]);
  assertEquals(r.error, `timed out after ${TIMEOUT_MS} ms: signal: killed`);
  assert(r.ms >= TIMEOUT_MS - 50 && r.ms < TIMEOUT_MS + 5_000, `${r.ms} ms`);
});

Deno.test("runExtensionCommand: the output is capped, the rest drained (the command is not blocked)", async () => {
  const r = await runExtensionCommand(
    ["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' a; echo end >&2"],
    { ...opts, maxOutputBytes: 100 },
  );
  assertEquals([r.ok, r.truncated, r.output], [true, true, "a".repeat(100)]);
});

Deno.test("runExtensionCommand: a background child holding the output does not hold the run", async () => {
  const r = await runExtensionCommand(["sh", "-c", "sleep 20 & echo $!"], opts);
  try {
    assertEquals(r.ok, true);
    assert(/^\d+$/.test(r.output), r.output);
    assert(r.ms < 5_000, `${r.ms} ms`);
  } finally {
    if (/^\d+$/.test(r.output)) Deno.kill(Number(r.output), "SIGKILL"); // the test's own sleep
  }
});

Deno.test("runExtensionCommand: an abort kills the command", async () => {
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 200);
  const r = await runExtensionCommand(["sleep", "30"], { ...opts, signal: ac.signal });
  assertEquals([r.ok, r.error], [false, "signal: killed"]);
});

/** Whether process `pid` still runs (a zombie or no process: not). */
function running(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 40 && running(pid); i++) await new Promise((r) => setTimeout(r, 50));
  return !running(pid);
}

Deno.test("runExtensionCommand: the timeout and an abort kill the command's children too", async () => {
  const t = await runExtensionCommand(["sh", "-c", "sleep 30 & echo $!; wait"], {
    ...opts,
    timeoutMs: TIMEOUT_MS,
  });
  assertEquals([t.ok, t.timedOut], [false, true]);
  assert(/^\d+$/.test(t.output), t.output);
  assert(await gone(Number(t.output)), `sleep ${t.output} still runs after the timeout`);
  // the abort comes once the command says its child runs (it writes the pid to a file), not after a guess
  const dir = await Deno.makeTempDir({ prefix: "flanctl-ext-run-" });
  try {
    const ac = new AbortController();
    let ended = false; // the run ended without the abort: the assertions below say how
    const started = (async () => {
      while (!ended && !/^\d+\n/.test(await Deno.readTextFile(`${dir}/pid`).catch(() => ""))) {
        await new Promise((r) => setTimeout(r, 10));
      }
      ac.abort();
    })();
    const a = await runExtensionCommand([
      "sh",
      "-c",
      'sleep 30 & echo $!; echo $! >"$D/pid.t"; mv "$D/pid.t" "$D/pid"; wait',
    ], {
      ...opts,
      env: { ...opts.env, D: dir },
      signal: ac.signal,
    });
    ended = true;
    await started;
    assertEquals([a.ok, a.error], [false, "signal: killed"]);
    assertEquals(a.output, (await Deno.readTextFile(`${dir}/pid`)).trim());
    assert(await gone(Number(a.output)), `sleep ${a.output} still runs after the abort`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
