/**
 * The doctor's iproute2 fallback reader (used when the netlink layer cannot be loaded) gives the same
 * views as the netlink layer, and the async runner behind it reports a missing binary and a timeout.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertRejects } from "./assert.ts";
import { nsSh, withNetns } from "./netns.ts";
import { NsExec } from "../lib/observe/exec.ts";
import { IpCliReader } from "../lib/observe/kernel_ip.ts";
import { openKernel } from "../lib/observe/kernel.ts";
import { CommandNotFoundError, runProcess } from "../lib/base/run.ts";
import { httpGet } from "../lib/observe/http_get.ts";

needsRoot.test("doctor: the ip -j reader matches the netlink layer in a namespace", async () => {
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

needsRoot.test("doctor: health endpoints are asked from inside the checked namespace, without curl", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("http");
    const dir = await Deno.makeTempDir({ prefix: "flanctl-http-" });
    let server: Deno.ChildProcess | null = null;
    try {
      await Deno.writeTextFile(`${dir}/readyz`, "ok\n");
      const url = "http://127.0.0.1:18286/readyz";
      const none = await httpGet(ns, url, 1000);
      assertEquals(none.status, null);
      assert(none.error, "a refused connection names its reason");
      server = new Deno.Command("ip", {
        args: ["netns", "exec", ns, "python3", "-m", "http.server", "-b", "127.0.0.1", "-d", dir, "18286"],
        stdout: "null",
        stderr: "null",
      }).spawn();
      // python3's start-up and its answers are slow on a loaded machine: up to 30 s, 10 s per request.
      const end = Date.now() + 30_000;
      let r = await httpGet(ns, url, 10_000);
      while (r.status === null && Date.now() < end) {
        await new Promise((res) => setTimeout(res, 100));
        r = await httpGet(ns, url, 10_000);
      }
      // The server exists only in `ns`: an answer means the socket was made there.
      assertEquals([r.status, r.body], [200, "ok\n"]);
      assertEquals((await httpGet(ns, "http://127.0.0.1:18286/absent", 10_000)).status, 404);
    } finally {
      if (server) {
        server.kill("SIGKILL");
        await server.status;
      }
      await Deno.remove(dir, { recursive: true });
    }
  });
});
