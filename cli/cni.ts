/**
 * `flanctl cni <plugin>`: runs one of the built-in CNI plugins (flannel, bridge, host-local, loopback,
 * portmap) exactly as a runtime would run the symlinked executable: CNI_* environment and the network config on
 * stdin in, result or error JSON on stdout. The work is done by cli/cni_main.ts, the same code the
 * symlink fast path uses.
 * @module
 */
import type { Command } from "commander";
import { exitWith } from "./exit.ts";

/** Registers `cni` on the command tree. */
export function register(program: Command): void {
  program
    .command("cni")
    .description("run a built-in CNI plugin (CNI_COMMAND etc. in the environment, network config on stdin)")
    .argument("<plugin>", "flannel | bridge | host-local | loopback | portmap")
    .addHelpText(
      "after",
      `
Environment (CNI spec 1.1.0): CNI_COMMAND (ADD, DEL, CHECK, STATUS, GC, VERSION), CNI_CONTAINERID,
CNI_NETNS, CNI_IFNAME, CNI_ARGS, CNI_PATH. The result (or {cniVersion, code, msg, details}) is printed on
stdout; logs go to stderr. Installed as /opt/cni/bin/<plugin> symlinks, flanctl does the same by name.

Example:
  echo '{"cniVersion":"1.1.0","name":"n"}' | CNI_COMMAND=VERSION flanctl cni bridge`,
    )
    .action(async (plugin: string) => {
      const { cniMain } = await import("./cni_main.ts");
      exitWith(await cniMain(plugin));
    });
}
