/**
 * How often a run of the CNI bundle into a fresh DENO_DIR leaves no V8 code cache (Deno writes it from a
 * background thread the exit can beat; docs/performance.md, "The CNI code cache"), for CNI VERSION alone and
 * for install's warm-up run (VERSION plus one child process, lib/cni/launch.ts CNI_WARM_ENV): per mode, how
 * many first runs missed, and how many runs after a miss missed again.
 *
 *   deno run -A bench/cni_cache_race.ts <install>/lib/flanctl/cni.js [--dirs 30]
 * @module
 */
import { hasCodeCache } from "../lib/install/code_cache.ts";
import { CNI_DENO_RUN_FLAGS, CNI_WARM_ENV } from "../lib/cni/launch.ts";
import { arg } from "./own_netns.ts";

const js = Deno.args.find((a) => a.endsWith(".js"));
if (!js) {
  console.error("usage: deno run -A bench/cni_cache_race.ts <path to cni.js> [--dirs N]");
  Deno.exit(2);
}
const DIRS = arg("--dirs", 30);
for (const warm of [false, true]) {
  let firstMiss = 0, laterRuns = 0, laterMiss = 0;
  for (let i = 0; i < DIRS; i++) {
    const d = Deno.makeTempDirSync({ prefix: "flanctl-cache-race-" });
    try {
      for (let n = 0; n < 30; n++) {
        await new Deno.Command(Deno.execPath(), {
          args: ["run", ...CNI_DENO_RUN_FLAGS, js],
          env: {
            DENO_DIR: d,
            FLANCTL_ARGV0: "loopback",
            CNI_COMMAND: "VERSION",
            ...(warm ? { [CNI_WARM_ENV]: "1" } : {}),
          },
          stdout: "null",
          stderr: "null",
        }).output();
        const ok = hasCodeCache(d, new URL(`file://${js}`).href);
        if (n === 0 && !ok) firstMiss++;
        if (n > 0) laterRuns++, laterMiss += ok ? 0 : 1;
        if (ok) break;
      }
    } finally {
      Deno.removeSync(d, { recursive: true });
    }
  }
  console.log(
    `${
      warm ? "VERSION + child process (install's warm-up)" : "VERSION alone"
    }: first run missed ${firstMiss} ` +
      `of ${DIRS}; runs after a miss missed ${laterMiss} of ${laterRuns}; load ${
        Deno.loadavg()[0].toFixed(1)
      }`,
  );
}
