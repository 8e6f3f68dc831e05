/**
 * The doctor's iproute2 fallback reader (used when the netlink layer cannot be loaded) gives the same
 * views as the netlink layer, and the async runner behind it reports a missing binary and a timeout.
 * @module
 */
import { assert, assertEquals, assertRejects } from "./assert.ts";
import { nsSh, withNetns } from "./netns.ts";
import { NsExec } from "../lib/doctor/exec.ts";
import { IpCliReader } from "../lib/doctor/kernel_ip.ts";
import { openKernel } from "../lib/doctor/kernel.ts";
import { CommandNotFoundError, runProcess } from "../lib/proc/run.ts";

Deno.test("doctor: the ip -j reader matches the netlink layer in a namespace", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("ipcli");
    await nsSh(ns, "ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1");
    await nsSh(ns, "ip", "addr", "add", "10.9.0.1/24", "dev", "d0");
    await nsSh(ns, "ip", "link", "set", "d0", "up");
    await nsSh(ns, "ip", "link", "set", "d1", "up");
    const cli = await IpCliReader.load(new NsExec(ns));
    const nl = openKernel(ns);
    try {
      const names = (r: { links(): { name: string; index: number }[] }) =>
        r.links().map((l) => `${l.name}:${l.index}`).sort();
      assertEquals(names(cli), names(nl));
      assert(cli.addrs(4).some((a) => a.local === "10.9.0.1" && a.prefix === 24));
      const dsts = (rs: { dst: string; table: number }[]) =>
        rs.filter((r) => r.table === 254).map((r) => r.dst).sort();
      assertEquals(dsts(cli.routes({ family: 4 })), dsts(nl.routes({ family: 4 })));
    } finally {
      nl.close();
    }
  });
});

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
