import { assertEquals, assertRejects } from "../../tests/assert.ts";
import { delegate } from "./delegate.ts";
import { CniError } from "./spec.ts";
import type { CmdArgs } from "./spec.ts";

/** A CNI_PATH holding one executable plugin `name` with the shell body `body`. */
async function withPlugin(name: string, body: string, fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-delegate-" });
  try {
    await Deno.writeTextFile(`${dir}/${name}`, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const base = (dir: string): CmdArgs => ({
  command: "ADD",
  containerId: "c1",
  netns: "/var/run/netns/none",
  ifname: "eth0",
  args: "",
  path: [dir],
  stdin: "",
});

Deno.test("delegate: an exec'd plugin refusing its config at once answers with its own error, not a broken pipe", async () => {
  // It exits without reading stdin; 4 MiB of config is more than a pipe holds, so the write meets a closed pipe.
  const conf = JSON.stringify({ cniVersion: "1.0.0", name: "n", type: "refuser", pad: "x".repeat(4 << 20) });
  const err = `{"cniVersion":"1.0.0","code":7,"msg":"invalid network config","details":"refused"}`;
  await withPlugin("refuser", `echo '${err}'; exit 1`, async (dir) => {
    const e = await assertRejects(() => delegate("refuser", "ADD", conf, base(dir)), CniError) as CniError;
    assertEquals([e.code, e.msg], [7, "invalid network config"]);
  });
});

Deno.test("delegate: an exec'd plugin gets the spec's environment and its config on stdin; its result is parsed", async () => {
  await withPlugin(
    "echoer",
    `conf=$(cat); printf '{"cniVersion":"1.0.0","cmd":"%s","id":"%s","ifname":"%s","len":%s}' ` +
      `"$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_IFNAME" "\${#conf}"`,
    async (dir) => {
      const conf = JSON.stringify({ cniVersion: "1.0.0", name: "n", type: "echoer" });
      const r = await delegate("echoer", "ADD", conf, base(dir));
      assertEquals(r, { cniVersion: "1.0.0", cmd: "ADD", id: "c1", ifname: "eth0", len: conf.length });
    },
  );
});
