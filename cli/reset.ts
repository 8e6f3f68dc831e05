/**
 * `flanctl reset`: removes every device, route, rule and file the daemon made on this node (for a rollback to
 * flanneld or an uninstall, after stopping the daemon). See lib/daemon/reset.ts for what goes and what stays.
 * @module
 */
import type { Command } from "commander";
import { exitWith } from "./exit.ts";
import { DEFAULT_PATHS } from "../lib/observe/paths.ts";
import { parseOutput } from "../lib/base/ui/output.ts";
import { DEFAULT_STATE_DIR } from "../lib/daemon/options.ts";
import type { StoreOptions } from "../lib/store/open.ts";
import { addSharedStoreOptions } from "./store_flags.ts";

interface Flags extends StoreOptions {
  subnetFile: string;
  stateDir: string;
  force?: boolean;
  output: string;
}

/** The `-o json` view of `flanctl reset`. */
export interface ResetJson {
  removed: string[];
  failed: string[];
  /** Routes into the pod network that nothing ties to flanctl, left in place, with why. */
  kept: string[];
}

/** Registers `flanctl reset`. */
export function register(program: Command): void {
  const cmd = program.command("reset")
    .description(
      "remove every device, route, rule and file the stopped daemon made here (rollback to flanneld); " +
        "keeps cni0, pods and the lease; exit 1 if anything could not be removed",
    )
    .option(
      "--subnet-file <path>",
      "subnet.env the daemon wrote (its pod network; the state file is next to it)",
      Deno.env.get("FLANNELD_SUBNET_FILE") || DEFAULT_PATHS.subnetFile,
    )
    .option("--state-dir <dir>", "the daemon's --state-dir (saved VTEP MACs)", DEFAULT_STATE_DIR)
    .option("--force", "reset even though a flanctl daemon or flanneld runs in this network namespace")
    .option("-o, --output <format>", "table or json", "table");
  addSharedStoreOptions(cmd);
  cmd.action(async (f: Flags) => {
    const fmt = parseOutput(f.output);
    const { leaseGateways, resetNode } = await import("../lib/daemon/reset.ts");
    const { openNetlink } = await import("../lib/netlink/mod.ts");
    // The leases first: a gateway route is removed only when it goes via a lease's PublicIP.
    const gateways = await leaseGateways(f);
    const nl = openNetlink();
    let rep;
    try {
      rep = await resetNode({ subnetFile: f.subnetFile, stateDir: f.stateDir, force: !!f.force }, {
        nl,
        gateways,
      });
    } finally {
      nl.close();
    }
    const view: ResetJson = { removed: rep.removed, failed: rep.failed, kept: rep.kept };
    const text = fmt === "json" ? JSON.stringify(view, null, 2) + "\n" : [
      ...(view.removed.length
        ? view.removed.map((x) => `removed ${x}`)
        : ["nothing of flanctl's left to remove"]),
      ...view.kept.map((x) => `kept    ${x}`),
      ...view.failed.map((x) => `FAILED  ${x}`),
    ].join("\n") + "\n";
    await Deno.stdout.write(new TextEncoder().encode(text));
    exitWith(view.failed.length ? 1 : 0);
  });
}
