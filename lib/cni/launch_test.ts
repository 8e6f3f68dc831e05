/**
 * install.sh's launcher, where it is installed, runs the bundles with lib/cni/launch.ts's flags (the bundles
 * themselves, as root: tests/daemon_bundle_test.ts).
 */
import { assert, assertEquals } from "../../tests/assert.ts";
import { BUNDLE_DENO_RUN_FLAGS, CNI_DENO_RUN_FLAGS } from "./launch.ts";

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
