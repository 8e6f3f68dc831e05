/**
 * install.sh's launcher, where it is installed, runs the bundles with lib/cni/launch.ts's flags (the bundles
 * themselves, as root: tests/daemon_bundle_test.ts).
 */
import { assert, assertEquals } from "../../tests/assert.ts";
import { BUNDLE_DENO_RUN_FLAGS, CNI_DENO_RUN_FLAGS, earlyDelSh } from "./launch.ts";

const LAUNCHER = "/usr/local/bin/flanctl";
const launcherText = (() => {
  try {
    return Deno.readTextFileSync(LAUNCHER);
  } catch {
    return null;
  }
})();

Deno.test({
  name: "daemon bundle: install.sh's launcher runs daemon.js with the bundles' flags (lib/cni/launch.ts)",
  // Only where install.sh installed a launcher (CI runs it first; a compiled binary has no launcher).
  ignore: !launcherText?.startsWith("#!/bin/sh"),
  fn() {
    const lines = launcherText!.split("\n").filter((l) => l.includes("/daemon.js"));
    assertEquals(lines.length, 2, `the flanneld and the daemon line:\n${launcherText}`);
    for (const l of lines) {
      assert(l.includes(` run ${BUNDLE_DENO_RUN_FLAGS.join(" ")} $v8 "`), l);
    }
    const cni = launcherText!.split("\n").find((l) => l.includes("/cni.js"));
    assert(cni?.includes(` run ${CNI_DENO_RUN_FLAGS.join(" ")} "`), cni);
  },
});

Deno.test("early DEL: sh answers only a DEL with a filled record, a valid environment and no netns", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const records = `${dir}/rec ords'`; // a space and a quote: the path is quoted for sh
    Deno.mkdirSync(records);
    for (const name of ["loopback:lo:c1", "flannel:eth0:c1", "portmap:eth0:c1"]) {
      Deno.writeTextFileSync(`${records}/${name}`, "deleted\n");
    }
    Deno.writeTextFileSync(`${records}/flannel:eth0:c2`, ""); // an ADD of c2 started since
    // What the lookup would find for the IDs and names the launcher must refuse, were they not refused.
    for (const name of ["flannel:eth0:-c1", "flannel:eth*:c1", "flannel:eth0:c1:c1", "flannel:.:c1"]) {
      Deno.writeTextFileSync(`${records}/${name}`, "deleted\n");
    }
    Deno.mkdirSync(`${records}/flannel:eth0:c9`); // `-s` is true of a directory: "c9/.." would name one
    for (const p of ["loopback", "flannel", "portmap"]) {
      // Exit 0 when answered; 7 when it falls through to what would be the exec of Deno.
      Deno.writeTextFileSync(`${dir}/${p}`, `#!/bin/sh\n${earlyDelSh(records)}\nexit 7\n`, { mode: 0o755 });
    }
    const ok = { CNI_COMMAND: "DEL", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0", CNI_PATH: "/opt/cni/bin" };
    const cases: [string, string, Record<string, string>, number][] = [
      ["answered", "flannel", ok, 0],
      ["loopback's", "loopback", { ...ok, CNI_IFNAME: "lo" }, 0],
      ["netns gone", "flannel", { ...ok, CNI_NETNS: `${dir}/gone` }, 0],
      ["netns there", "flannel", { ...ok, CNI_NETNS: dir }, 7],
      ["netns there, portmap", "portmap", { ...ok, CNI_NETNS: dir }, 0],
      ["a dangling link", "flannel", { ...ok, CNI_NETNS: `${dir}/dangling` }, 7],
      ["record emptied by an ADD", "flannel", { ...ok, CNI_CONTAINERID: "c2" }, 7],
      ["no record", "flannel", { ...ok, CNI_CONTAINERID: "c3" }, 7],
      ["other plugin's record", "loopback", ok, 7],
      ["ADD", "flannel", { ...ok, CNI_COMMAND: "ADD" }, 7],
      ["CHECK", "flannel", { ...ok, CNI_COMMAND: "CHECK" }, 7],
      ["no CNI_PATH", "flannel", { ...ok, CNI_PATH: "" }, 7],
      ["an ID the full path refuses", "flannel", { ...ok, CNI_CONTAINERID: "-c1" }, 7],
      ["a path in the ID", "flannel", { ...ok, CNI_CONTAINERID: "c9/.." }, 7],
      ["a path in the ID, to a record", "flannel", { ...ok, CNI_CONTAINERID: "c9/../flannel:eth0:c1" }, 7],
      ["the name `.`", "flannel", { ...ok, CNI_IFNAME: "." }, 7],
      ["a glob in the name", "flannel", { ...ok, CNI_IFNAME: "eth*" }, 7],
      ["a colon in the name", "flannel", { ...ok, CNI_IFNAME: "eth0:c1" }, 7],
    ];
    Deno.symlinkSync(`${dir}/nowhere`, `${dir}/dangling`);
    for (const [what, plugin, env, code] of cases) {
      const o = await new Deno.Command(`${dir}/${plugin}`, { env, clearEnv: true, stdout: "piped" }).output();
      assertEquals([o.code, o.stdout.length], [code, 0], what);
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("early DEL: the answer reads the config to its end first, so a late writer gets no EPIPE", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(`${dir}/loopback:lo:c1`, "deleted\n");
    Deno.writeTextFileSync(`${dir}/loopback`, `#!/bin/sh\n${earlyDelSh(dir)}\nexit 7\n`, { mode: 0o755 });
    const p = new Deno.Command(`${dir}/loopback`, {
      env: { CNI_COMMAND: "DEL", CNI_CONTAINERID: "c1", CNI_IFNAME: "lo", CNI_PATH: "/opt/cni/bin" },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    // A runtime that writes the config a little late: had the launcher exited unread, this write would fail.
    await new Promise((r) => setTimeout(r, 300));
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(`{"cniVersion":"1.1.0","name":"lo","type":"loopback"}`));
    await w.close();
    const o = await p.output();
    assertEquals([o.code, o.stdout.length], [0, 0]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
