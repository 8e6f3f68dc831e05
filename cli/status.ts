/**
 * `flanctl status`: one screen for a node (daemon, store, lease, backend, peers, last reconcile, rules,
 * health endpoint); `-o json`; `--watch` redraws it. Exit 0 while the daemon runs, 1 when it does not.
 * @module
 */
import type { Command } from "commander";
import { UsageError } from "../lib/base/errors.ts";
import type { StoreOptions } from "../lib/store/open.ts";
import { addSharedStoreOptions } from "./store_flags.ts";
import { exitWith } from "./exit.ts";
import { DEFAULT_PATHS } from "../lib/observe/paths.ts";
import { parseOutput } from "../lib/base/ui/output.ts";
import { sleep } from "../lib/base/sleep.ts";
import { writeOut } from "./stdout.ts";

interface StatusFlags extends StoreOptions {
  netns?: string;
  subnetFile: string;
  output: string;
  watch?: string | boolean;
}

/** Registers `flanctl status`. */
export function register(program: Command): void {
  const cmd = program.command("status")
    .description(
      "show this node's daemon, store, lease, backend, peers, reconcile and rules; exit 1 if the daemon is down",
    )
    .option("--netns <name>", "show the node living in this network namespace")
    .option(
      "--subnet-file <path>",
      "subnet.env written by the daemon (its state file lives next to it)",
      DEFAULT_PATHS.subnetFile,
    )
    .option("--watch [seconds]", "redraw every N seconds (default 2) until interrupted")
    .option("-o, --output <format>", "table or json", "table");
  addSharedStoreOptions(cmd);
  cmd.action(async (flags: StatusFlags) => {
    const fmt = parseOutput(flags.output);
    const every = flags.watch === undefined ? 0 : flags.watch === true ? 2 : Number(flags.watch);
    if (!Number.isFinite(every) || every < 0 || (flags.watch !== undefined && every < 0.5)) {
      throw new UsageError(`--watch: '${flags.watch}' is not a number of seconds >= 0.5`);
    }
    const { gatherSnapshot } = await import("../lib/observe/snapshot.ts");
    const { localSnapshotOptions } = await import("../lib/observe/local_options.ts");
    const { nodeStatus } = await import("../lib/status/status.ts");
    const { renderStatus } = await import("../lib/status/render.ts");
    let code = 0;
    const once = async () => {
      const ctx = await gatherSnapshot(localSnapshotOptions(flags.netns ?? null, flags.subnetFile, flags));
      if (ctx.fatal.length) throw new UsageError(`--netns: ${ctx.fatal.join("; ")}`);
      const st = await nodeStatus(ctx, flags.netns ?? Deno.hostname());
      code = st.daemon.running ? 0 : 1;
      return fmt === "json" ? JSON.stringify(st, null, every ? 0 : 2) + "\n" : renderStatus(st);
    };
    const out = (s: string) => {
      if (!writeOut(s)) stop.abort(); // the reader went away (`| head`): no more redraws
    };
    const stop = new AbortController();
    if (!every) {
      out(await once());
      exitWith(code);
      return;
    }
    // --watch: a table redraws in place on a terminal; JSON is one document per line.
    const tty = Deno.stdout.isTerminal() && fmt !== "json";
    const onSig = () => stop.abort();
    Deno.addSignalListener("SIGINT", onSig);
    try {
      while (!stop.signal.aborted) {
        const text = await once();
        out(tty ? `\x1b[H\x1b[2J${new Date().toISOString()}\n${text}` : text);
        await sleep(every * 1000, stop.signal);
      }
    } finally {
      Deno.removeSignalListener("SIGINT", onSig);
    }
    exitWith(code);
  });
}
