import { assertEquals, assertRejects } from "../../tests/assert.ts";
import { CommandNotFoundError, runAttached, runProcess } from "./run.ts";

Deno.test("runProcess: a tool that exits without reading its stdin gives its own exit code and stderr", async () => {
  // 4 MiB: far more than a pipe holds, so the write hits the closed pipe (EPIPE) once the tool is gone.
  const r = await runProcess(["sh", "-c", "echo 'bad input: line 1' >&2; exit 2"], {
    stdin: "x".repeat(4 << 20),
  });
  assertEquals(r, { code: 2, stdout: "", stderr: "bad input: line 1\n", timedOut: false });
});

Deno.test("runProcess: stdin is written while the output is read (no deadlock on full pipes)", async () => {
  const text = "line\n".repeat(400_000); // 2 MB through cat and back
  const r = await runProcess(["cat"], { stdin: text });
  assertEquals(r.code, 0);
  assertEquals(r.stdout.length, text.length);
});

Deno.test("runProcess: a missing binary is a CommandNotFoundError", async () => {
  await assertRejects(() => runProcess(["/nonexistent/flanctl-tool"]), CommandNotFoundError);
});

Deno.test("runAttached: exit code, the signal that ended it, a missing binary typed", async () => {
  assertEquals(await runAttached(["sh", "-c", "exit 3"]), { code: 3, signal: null });
  const killed = await runAttached(["sh", "-c", "kill -TERM $$"]);
  assertEquals(killed.signal, "SIGTERM");
  await assertRejects(() => runAttached(["/nonexistent/flanctl-no-such-tool"]), CommandNotFoundError);
  assertEquals((await runAttached(["sh", "-c", 'test "$X" = y'], { env: { X: "y" } })).code, 0);
});
