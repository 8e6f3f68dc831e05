/**
 * flanctl entry point. In symlink mode (installed as /opt/cni/bin/flannel, bridge, host-local, loopback,
 * portmap) it dispatches on the name it was invoked as; otherwise it runs the command tree. Each path imports only
 * what it needs, so a CNI call does not pay for commander or the daemon.
 * @module
 */

/** Names under which the binary acts as a CNI plugin. */
const CNI_NAMES = new Set(["flannel", "bridge", "host-local", "loopback", "portmap"]);

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
} else {
  const { main } = await import("./cli/root.ts");
  Deno.exit(await main(Deno.args));
}
