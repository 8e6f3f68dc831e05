/**
 * The store flags (file, etcd and Kubernetes: 15 of them, shared by every `lease` subcommand and the
 * doctor) are listed once, in `flanctl lease --help`; each command that takes them accepts them all and
 * its own help says where they are described, instead of repeating the list. When none of them chooses a
 * store, the command uses the store the running daemon records in its state file (flanctl.json next to
 * `--subnet-file`, or next to FLANNELD_SUBNET_FILE / /run/flannel/subnet.env for `lease`).
 * @module
 */
import { Command, type Option } from "commander";
import { addStoreOptions, type StoreOptions, withRecordedStore } from "../lib/store/open.ts";
import { STORE_FLAGS } from "../lib/store/flags.ts";
import { flagKey } from "../lib/base/goflag.ts";
import { recordedStore } from "../lib/node/daemon_state.ts";
import { DEFAULT_PATHS } from "../lib/observe/paths.ts";

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
    "\nStore flags (--store-dir, --etcd-*, --kube-*; each also as FLANNELD_<FLAG>):\n  see 'flanctl lease --help'." +
      "\n  Without one that chooses a store, the store the daemon records in its state file is used.",
  );
  cmd.hook("preAction", (_this, action) => useRecordedStore(action));
  return cmd;
}

/** Marks option values taken from the daemon's state file (commander's "config" source). */
const RECORDED = "config";

/**
 * When no flag chooses a store (`--store`, `--store-dir`, `--etcd-endpoints`, `--kube-subnet-mgr`, from
 * the command line or the environment), replaces the store options' defaults of `action` with the store
 * the daemon recorded (flags that were given stay on top: `--kubeconfig-file` on the host of a pod's
 * daemon). Without a readable state file, nothing changes. Exported for tests.
 */
export function useRecordedStore(action: Command): void {
  const all = action.opts() as StoreOptions & { subnetFile?: string };
  const given: Record<string, unknown> = {};
  for (const f of STORE_FLAGS) {
    const k = flagKey(f.name), src = action.getOptionValueSource(k);
    if (src === "cli" || src === "env") given[k] = (all as Record<string, unknown>)[k];
  }
  const subnetFile = all.subnetFile || Deno.env.get("FLANNELD_SUBNET_FILE") || DEFAULT_PATHS.subnetFile;
  const rec = recordedStore(subnetFile);
  const merged = withRecordedStore(all, given as StoreOptions, rec?.record ?? null, rec?.path ?? "");
  if (merged === all) return;
  for (const f of STORE_FLAGS) {
    const k = flagKey(f.name);
    if (!(k in given)) action.setOptionValueWithSource(k, (merged as Record<string, unknown>)[k], RECORDED);
  }
  action.setOptionValueWithSource("recordedIn", merged.recordedIn, RECORDED);
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
