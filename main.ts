/**
 * flanctl entry point. In symlink mode (installed as /opt/cni/bin/flannel, bridge, host-local, loopback,
 * portmap) it dispatches on the name it was invoked as; invoked as `flanneld`, or as `flanctl daemon …`, it runs the
 * daemon's own flag parser; otherwise the command tree. Each path imports only what it needs, so neither a
 * CNI call nor the daemon pays for commander.
 * @module
 */

import { CNI_PLUGIN_NAMES } from "./lib/cni/names.ts";

/** Names under which the binary acts as a CNI plugin. */
const CNI_NAMES = new Set(CNI_PLUGIN_NAMES);

function invokedAs(): string {
  // The launcher script passes its own $0 (the symlink name); a compiled binary reads argv[0].
  const fromLauncher = Deno.env.get("FLANCTL_ARGV0");
  if (fromLauncher !== undefined) {
    Deno.env.delete("FLANCTL_ARGV0");
    return fromLauncher;
  }
  try {
    const cmdline = Deno.readTextFileSync("/proc/self/cmdline");
    return cmdline.slice(0, cmdline.indexOf("\0"));
  } catch {
    return "flanctl";
  }
}

const name = invokedAs().split("/").pop() ?? "flanctl";
if (CNI_NAMES.has(name)) {
  const { cniMain } = await import("./cli/cni_main.ts");
  Deno.exit(await cniMain(name));
} else if (name === "flanneld" || Deno.args[0] === "daemon") {
  const { daemonMain } = await import("./cli/daemon_main.ts");
  Deno.exit(await daemonMain(name === "flanneld" ? Deno.args : Deno.args.slice(1)));
} else {
  const { main } = await import("./cli/root.ts");
  Deno.exit(await main(Deno.args));
}
