/** runProcess: a missing binary, a timeout, stdin and env; NsExec without a namespace. */
import { assert, assertEquals, assertRejects } from "../../tests/assert.ts";
import { CommandNotFoundError, runProcess } from "./run.ts";
import { NsExec } from "../observe/exec.ts";

Deno.test("proc: a missing binary is a CommandNotFoundError; a timeout kills and says so", async () => {
  const e = await assertRejects(
    () => runProcess(["/nonexistent/flanctl-no-such-binary"]),
    CommandNotFoundError,
  ) as CommandNotFoundError;
  assertEquals(e.command, "/nonexistent/flanctl-no-such-binary");
  const r = await runProcess(["sleep", "30"], { timeoutMs: 200 });
  assert(r.timedOut);
  assert(r.code !== 0);
  const cat = await runProcess(["cat"], { stdin: "hello", env: { X: "1" } });
  assertEquals([cat.code, cat.stdout, cat.timedOut], [0, "hello", false]);
  const env = await runProcess(["sh", "-c", 'printf %s "$FLANCTL_RUN_TEST"'], {
    env: { FLANCTL_RUN_TEST: "v" },
  });
  assertEquals(env.stdout, "v");
  const none = await new NsExec(null).run(["flanctl-no-such-binary"]);
  assertEquals(none.code, null);
});
