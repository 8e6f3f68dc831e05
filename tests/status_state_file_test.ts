/**
 * `flanctl status` with a state file that is there but unusable says what is wrong with it, instead of
 * claiming there is none (run in a namespace of its own, with a file store in a temp dir).
 * @module
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, withNetns } from "./netns.ts";
import type { StatusJson } from "../lib/status/status.ts";

needsRoot.test("status: a malformed or unreadable state file is named with its problem, not reported as missing", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("st");
    const dir = Deno.makeTempDirSync({ prefix: "flanctl-status-" });
    try {
      const status = async () => {
        const r = await flanctl(
          ["status", "--subnet-file", `${dir}/subnet.env`, "--store-dir", dir, "-o", "json"],
          { ns },
        );
        return { code: r.code, st: JSON.parse(r.stdout) as StatusJson };
      };
      const none = await status();
      assertEquals(none.code, 1, "no daemon: exit 1");
      assertStringIncludes(none.st.daemon.detail, `no ${dir}/flanctl.json`);
      Deno.writeTextFileSync(`${dir}/flanctl.json`, "garbage\n");
      const bad = await status();
      assertEquals(bad.code, 1);
      assertStringIncludes(bad.st.daemon.detail, `${dir}/flanctl.json: not JSON`);
      Deno.writeTextFileSync(`${dir}/flanctl.json`, `{"pid": -4}\n`);
      assertStringIncludes((await status()).st.daemon.detail, "field pid: missing or not a positive integer");
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  });
});
