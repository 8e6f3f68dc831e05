/**
 * Calling another CNI plugin: one of ours runs in-process (no exec, no second start-up); any other type is
 * exec'd from CNI_PATH with the spec's environment and its output parsed as a result or an error.
 * @module
 */
import type { Plugin } from "./skel.ts";
import { type CmdArgs, type CniCommand, CniError, ErrCode } from "./spec.ts";
import { runProcess } from "../base/run.ts";

/** Plugins that run in-process, by type name (the table is lib/cni/plugins.ts). */
export type PluginTable = Record<string, () => Promise<Plugin>>;

let inProcess: PluginTable = {};

/**
 * Sets the plugins {@link delegate} runs in-process; any other type is exec'd from CNI_PATH. Called by
 * lib/cni/plugins.ts when it is loaded: the table imports the plugins, which import this module, so the
 * table cannot live here without an import cycle.
 */
export function usePlugins(table: PluginTable): void {
  inProcess = table;
}

/** Finds an executable named `type` in the CNI_PATH directories. */
export function findInPath(type: string, path: string[]): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.\-]*$/.test(type)) {
    throw new CniError(ErrCode.InvalidNetworkConfig, "invalid plugin type", `'${type}' is not a plugin name`);
  }
  for (const dir of path) {
    const p = `${dir}/${type}`;
    try {
      const st = Deno.statSync(p);
      if (st.isFile && ((st.mode ?? 0o111) & 0o111)) return p;
    } catch { /* next */ }
  }
  throw new CniError(
    ErrCode.PluginNotFound,
    "failed to find plugin",
    `no executable '${type}' in CNI_PATH (${path.join(":") || "empty"})`,
  );
}

/**
 * Runs plugin `type` with verb `command` and config `conf` (JSON text); other invocation values come from
 * `base`. Returns the parsed stdout (null when empty). Throws the delegate's error as a {@link CniError}.
 */
export async function delegate(
  type: string,
  command: CniCommand,
  conf: string,
  base: CmdArgs,
): Promise<Record<string, unknown> | null> {
  const args: CmdArgs = { ...base, command, stdin: conf };
  const ours = Object.hasOwn(inProcess, type) ? inProcess[type] : undefined;
  if (ours) {
    const { invoke, trace } = await import("./skel.ts");
    const p = await ours();
    trace(`delegate ${type} loaded`);
    return await invoke(p, args);
  }
  const exe = findInPath(type, base.path);
  const env: Record<string, string> = {
    CNI_COMMAND: command,
    CNI_CONTAINERID: args.containerId,
    CNI_NETNS: args.netns,
    CNI_IFNAME: args.ifname,
    CNI_ARGS: args.args,
    CNI_PATH: args.path.join(":"),
  };
  // The one process runner: the config is written while the output is read, and a delegate that exits
  // without reading it (a bad config, refused at once) answers with its own error, not a broken pipe.
  const o = await runProcess([exe], { env, stdin: conf, inheritStderr: true });
  const text = o.stdout.trim();
  let parsed: Record<string, unknown> | null = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new CniError(
        ErrCode.DecodingFailure,
        `delegate ${type} printed invalid JSON`,
        text.slice(0, 200),
      );
    }
  }
  if (o.code !== 0) {
    throw CniError.fromWire(parsed ?? {}, `delegate ${type} exited ${o.code}`);
  }
  return parsed;
}
