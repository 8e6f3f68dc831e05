/**
 * `flanctl daemon`: the node daemon (flanneld's job). Flags mirror flanneld's, each also readable from
 * `FLANNELD_<FLAG>`; the store flags come from lib/store/open.ts.
 * @module
 */
import { Command } from "commander";
import { addDaemonOptions, applyEnv, toDaemonOptions } from "../lib/daemon/options.ts";
import { addStoreOptions, type StoreOptions } from "../lib/store/open.ts";

/** Registers `flanctl daemon`. */
export function register(program: Command): void {
  const cmd = new Command("daemon")
    .description(
      "run the node daemon: acquire a subnet lease, set up the vxlan/host-gw backend, write subnet.env, " +
        "program routes/ARP/FDB for every peer, keep masquerade rules (flags as flanneld, also FLANNELD_<FLAG>)",
    );
  addDaemonOptions(cmd);
  addStoreOptions(cmd);
  cmd.action(async () => {
    applyEnv(cmd);
    const raw = cmd.opts();
    const o = toDaemonOptions(raw);
    const { runDaemon } = await import("../lib/daemon/run.ts");
    // A normal return is a clean stop (exit 0); fatal errors are thrown and reported by cli/root.ts.
    await runDaemon(o, raw as StoreOptions);
  });
  program.addCommand(cmd);
}
