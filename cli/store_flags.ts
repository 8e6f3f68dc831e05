/**
 * The store flags (file, etcd and Kubernetes: 15 of them, shared by every `lease` subcommand and the
 * doctor) are listed once, in `flanctl lease --help`; each command that takes them accepts them all and
 * its own help says where they are described, instead of repeating the list.
 * @module
 */
import { Command, type Option } from "commander";
import { addStoreOptions } from "../lib/store/open.ts";

/** Marks an option as one of a group listed elsewhere (hidden in the command's help, still completed). */
export const SHARED_GROUP = Symbol("flanctl shared option group");

/** Adds the store flags to `cmd`, hidden from its help, which points at the one listing. Returns `cmd`. */
export function addSharedStoreOptions(cmd: Command): Command {
  const before = new Set(cmd.options);
  addStoreOptions(cmd);
  for (const o of cmd.options) {
    if (before.has(o) || o.hidden) continue;
    o.hideHelp();
    (o as Option & { [SHARED_GROUP]?: string })[SHARED_GROUP] = "store";
  }
  cmd.addHelpText(
    "after",
    "\nStore flags (--store-dir, --etcd-*, --kube-*; each also as FLANNELD_<FLAG>):\n  see 'flanctl lease --help'.",
  );
  return cmd;
}

/** Whether `o` is hidden only because its group is listed elsewhere. */
export function isSharedOption(o: Option): boolean {
  return (o as Option & { [SHARED_GROUP]?: string })[SHARED_GROUP] !== undefined;
}

/** The store flags as one help section (flag, description with default and env), for `flanctl lease --help`. */
export function storeFlagsHelp(): string {
  const tmp = addStoreOptions(new Command("store"));
  const help = tmp.createHelp();
  const opts = help.visibleOptions(tmp).filter((o) => o.long !== "--help");
  const width = Math.max(...opts.map((o) => help.optionTerm(o).length));
  help.helpWidth = help.helpWidth ?? 80;
  const lines = opts.map((o) => help.formatItem(help.optionTerm(o), width, help.optionDescription(o), help));
  return `\nStore flags (every subcommand takes them; etcd at flanneld's default endpoints unless a flag below
selects another store):\n${lines.join("\n")}`;
}
