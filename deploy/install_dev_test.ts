/**
 * install.sh --dev's host set-up for the test suite, run in isolation (the whole --dev install rebuilds the
 * peers): the Debian packages the tests run, and its br_netfilter step with a stand-in modprobe and sysctl path.
 */
import { assert, assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { ROOT, run } from "../tests/netns.ts";

const INSTALL = Deno.readTextFileSync(`${ROOT}install.sh`);

/** A function of install.sh, by name, as its text. */
function shFunction(name: string): string {
  const m = new RegExp(`^${name}\\(\\) \\{\\n[\\s\\S]*?\\n\\}$`, "m").exec(INSTALL);
  if (!m) throw new Error(`install.sh has no function ${name}`);
  return m[0];
}

Deno.test("install.sh --dev: br_netfilter loaded when its sysctl is missing; built in or no module: no failure", async () => {
  assertStringIncludes(
    INSTALL,
    'if [ "$DEV" = 1 ]; then dev_br_netfilter /proc/sys/net/bridge/bridge-nf-call-iptables; fi',
  );
  const dir = await Deno.makeTempDir({ prefix: "flanctl-install-dev-" });
  try {
    await Deno.mkdir(`${dir}/bin`);
    // The stand-in records its arguments and exits with $MODPROBE_RC (1: no /lib/modules, no such module).
    await Deno.writeTextFile(
      `${dir}/bin/modprobe`,
      `#!/bin/sh\necho "$*" >>"${dir}/modprobe.calls"\nexit "\${MODPROBE_RC:-0}"\n`,
      { mode: 0o755 },
    );
    await Deno.writeTextFile(`${dir}/present`, "0\n");
    const step = async (sysctl: string, rc: number) => {
      await Deno.remove(`${dir}/modprobe.calls`).catch(() => {});
      const script = `set -euo pipefail\nlog() { printf 'install.sh: %s\\n' "$*"; }\n${
        shFunction("dev_br_netfilter")
      }\ndev_br_netfilter "$1"\necho end`;
      const r = await run(["bash", "-c", script, "_", sysctl], {
        env: { PATH: `${dir}/bin:${Deno.env.get("PATH")}`, MODPROBE_RC: String(rc) },
      });
      const calls = await Deno.readTextFile(`${dir}/modprobe.calls`).catch(() => "");
      return { code: r.code, out: r.stdout, calls };
    };
    // Built in (or loaded): the sysctl is there, nothing is run.
    assertEquals(await step(`${dir}/present`, 0), { code: 0, out: "end\n", calls: "" });
    const loaded = await step(`${dir}/missing`, 0);
    assertEquals([loaded.code, loaded.calls], [0, "br_netfilter\n"]);
    assertStringIncludes(loaded.out, "install.sh: loaded br_netfilter");
    // No module to load: a warning, and the install goes on.
    const failed = await step(`${dir}/missing`, 1);
    assertEquals([failed.code, failed.calls], [0, "br_netfilter\n"]);
    assertStringIncludes(failed.out, "install.sh: warning: br_netfilter is not loaded");
    assertStringIncludes(failed.out, "end\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** The test sources under `dir` (recursive) that run `python3`. */
function pythonUsers(dir: string): string[] {
  const found: string[] = [];
  for (const e of Deno.readDirSync(`${ROOT}${dir}`)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory && e.name !== "node_modules") found.push(...pythonUsers(path));
    else if (
      e.isFile && e.name.endsWith(".ts") && /"python3"/.test(Deno.readTextFileSync(`${ROOT}${path}`))
    ) {
      found.push(path);
    }
  }
  return found;
}

Deno.test("install.sh --dev: python3 is installed by name, as the tests run it", () => {
  const users = [...pythonUsers("tests"), ...pythonUsers("lib").filter((p) => p.endsWith("_test.ts"))];
  assert(users.length > 0, "no test runs python3: drop it from install.sh --dev");
  const dev = [...INSTALL.matchAll(/^ {2}pkgs\+=\(([^)]+)\)$/gm)].flatMap((m) => m[1].split(" "));
  assert(dev.includes("python3"), `install.sh --dev must install python3 (${users.join(", ")} run it)`);
});
