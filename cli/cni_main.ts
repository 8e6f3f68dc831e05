/**
 * The CNI fast path. In symlink mode main.ts calls {@link cniMain} with the name flanctl was invoked as; it
 * imports only the skeleton and the one plugin that name stands for (plugins it delegates to load on
 * demand), never commander or the daemon, so a CNI call pays for as little module loading as possible.
 *
 * Run as the main module it is a CNI entry point of its own (the plugin name from FLANCTL_ARGV0, as the
 * launcher sets it): `deno bundle cli/cni_main.ts` then gives one self-contained JavaScript file that
 * starts without deno.json, the lockfile or any TypeScript (see bench/cni_bench.ts for what it saves).
 * @module
 */
import { runExecutable } from "../lib/cni/skel.ts";
import { ourPlugin, PLUGINS } from "../lib/cni/plugins.ts";
import { markShortLived } from "../lib/base/process_kind.ts";
import { CNI_WARM_ENV, holdRuntime } from "../lib/cni/launch.ts";

/**
 * Runs plugin `pluginName` as a CNI executable (env + stdin) and returns the exit code. Marks the process
 * short-lived first (lib/base/process_kind.ts: FFI symbols bound without fast-call trampolines).
 */
export function cniMain(pluginName: string): Promise<number> {
  markShortLived();
  const load = ourPlugin(pluginName);
  if (!load) {
    const msg = `unknown CNI plugin '${pluginName}' (known: ${Object.keys(PLUGINS).join(", ")})`;
    Deno.stderr.writeSync(new TextEncoder().encode(`flanctl: ${msg}\n`));
    return Promise.resolve(2);
  }
  return runExecutable(pluginName, load);
}

if (import.meta.main) {
  holdRuntime(); // an upgrade's install-cni keeps this runtime's directory while the call runs
  const name = (Deno.env.get("FLANCTL_ARGV0") ?? "").split("/").pop() ?? "";
  Deno.env.delete("FLANCTL_ARGV0");
  const code = await cniMain(name);
  if (Deno.env.get(CNI_WARM_ENV) === "1") await warmProcessModules();
  // One turn of the event loop before exiting (an async op; a timer would load Deno's node:timers): the
  // runtime can store V8's code cache of this module in that turn when it had none (lib/cni/launch.ts), but
  // the exit usually comes first: the first run into a fresh DENO_DIR wrote it in only 8 and 13 of 30
  // directories (two rounds; docs/performance.md, "The CNI code cache"), so install repeats its warm-up run
  // until it is there (lib/install/code_cache.ts).
  // The plugin's own work is synchronous, so without it Deno.exit came first and no cache was ever written.
  await Deno.lstat("/");
  Deno.exit(code);
}

/**
 * Install's warm-up (lib/cni/launch.ts CNI_WARM_ENV): one child process through the function portmap's
 * firewall calls use (stdin, stdout and stderr piped, a timeout), so Deno loads, and caches, what they load.
 */
async function warmProcessModules(): Promise<void> {
  const { runProcess } = await import("../lib/base/run.ts");
  await runProcess(["/bin/sh", "-c", "cat >/dev/null"], { stdin: "{}", timeoutMs: 10_000 }).catch(() => {});
}
