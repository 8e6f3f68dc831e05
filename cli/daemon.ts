/**
 * `flanctl daemon` in the command tree: listed in `flanctl --help`, but main.ts runs `flanctl daemon …`
 * through cli/daemon_main.ts directly (no commander on the daemon path). Reached through commander (e.g. a
 * program built by a test), it hands its raw arguments to the same parser.
 * @module
 */
import { Command } from "commander";
import { daemonHelp } from "../lib/daemon/options.ts";
import { exitWith } from "./exit.ts";

/** Registers `flanctl daemon`. */
export function register(program: Command): void {
  const cmd = new Command("daemon")
    .description(
      "run the node daemon (flanneld's job, flanneld's flags and Go flag syntax, also FLANNELD_<FLAG>): " +
        "acquire a subnet lease, set up the vxlan/host-gw backend, write subnet.env, program peers, keep rules",
    )
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .argument("[flags...]");
  cmd.helpInformation = () => daemonHelp();
  cmd.action(async (_flags: string[], _o: unknown, c: Command) => {
    const { daemonMain } = await import("./daemon_main.ts");
    exitWith(await daemonMain(c.args));
  });
  program.addCommand(cmd);
}
