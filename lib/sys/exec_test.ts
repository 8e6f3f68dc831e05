import { assert, assertEquals, assertThrows } from "../../tests/assert.ts";
import { runProcess } from "../base/run.ts";
import { NetlinkError } from "./errors.ts";
import { execProcess } from "./exec.ts";

Deno.test("execProcess: a missing program is a NetlinkError with errno ENOENT, and this process goes on", () => {
  const e = assertThrows(
    () => execProcess("/nonexistent/flanctl-no-such", ["x"], {}),
    NetlinkError,
  ) as NetlinkError;
  assertEquals(e.errno, 2);
});

Deno.test("execProcess: the process becomes the program, same pid, with exactly the argv and env given", async () => {
  const mod = new URL("./exec.ts", import.meta.url).href;
  const script = `import { execProcess } from "${mod}";
console.log(Deno.pid);
execProcess("/bin/sh", ["sh", "-c", 'echo "$$ $X $#" "$0"', "zero"], { X: "y" });`;
  const r = await runProcess([Deno.execPath(), "eval", "--no-check", script]);
  assertEquals(r.code, 0, r.stderr);
  const [pid, line] = r.stdout.trim().split("\n");
  assert(/^\d+$/.test(pid), r.stdout);
  assertEquals(line, `${pid} y 0 zero`);
});
