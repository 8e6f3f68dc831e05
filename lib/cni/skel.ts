/**
 * The plugin skeleton: validates an invocation the way the reference library (pkg/skel) does, calls the
 * plugin's verb handler, and renders the result in the config's version. Used both when a plugin runs as
 * its own process ({@link runExecutable}) and when one of our plugins delegates to another in-process
 * ({@link invoke}).
 * @module
 */
import {
  checkCommand,
  checkVersion,
  type CmdArgs,
  CniError,
  compareVersions,
  CURRENT_VERSION,
  ErrCode,
  parseNetConf,
  readEnv,
  toCniError,
  versionInfo,
} from "./spec.ts";
import { type CniResult, formatResult } from "./result.ts";
import { CappedReadError, readCappedStream } from "../base/capped_read.ts";
import type { Shape } from "./gojson.ts";
import { DELETED_DIR_ENV, type DeletedRecord, openRecord, recordName } from "./deleted.ts";

/** What a verb handler gets. */
export interface PluginCall {
  args: CmdArgs;
  /** The parsed config object. */
  conf: Record<string, unknown>;
  /** The config's cniVersion (validated). */
  version: string;
  /**
   * ADD: the plugin tells that it made nothing for the attachment (portmap without port mappings), so a DEL
   * with the same config has nothing to remove either (lib/cni/deleted.ts). Absent for delegates.
   */
  holdsNothing?: () => void;
}

/** A plugin: verb handlers. ADD returns the internal result; the others return nothing on success. */
export interface Plugin {
  add(c: PluginCall): Promise<CniResult>;
  del(c: PluginCall): Promise<void>;
  check(c: PluginCall): Promise<void>;
  status(c: PluginCall): Promise<void>;
  gc(c: PluginCall): Promise<void>;
  /** The plugin's config struct, for matching keys as Go does (lib/cni/gojson.ts); default NET_CONF. */
  shape?: Shape;
}

/**
 * Runs one verb of `plugin` on already-read arguments. Returns the JSON to print (null when the verb prints
 * nothing). Throws {@link CniError}; its `cniVersion` for printing is in `.version` of the returned pair.
 * `onNothingHeld` runs when the plugin holds nothing for the attachment afterwards: after its DEL succeeded
 * on an accepted config, or after an ADD that succeeded having made nothing (lib/cni/deleted.ts).
 */
export async function invoke(
  plugin: Plugin,
  args: CmdArgs,
  onNothingHeld?: () => void,
): Promise<Record<string, unknown> | null> {
  if (args.command === "VERSION") return versionInfo();
  if (args.command === "DEL") return await invokeDel(plugin, args, onNothingHeld);
  const { conf, version } = parseNetConf(args.stdin, plugin.shape);
  checkCommand(args);
  checkVersion(version);
  const call: PluginCall = { args, conf, version };
  switch (args.command) {
    case "ADD": {
      let nothing = false;
      const r = await plugin.add(onNothingHeld ? { ...call, holdsNothing: () => nothing = true } : call);
      const out = formatResult(r, version);
      if (nothing) onNothingHeld!();
      return out;
    }
    case "CHECK":
      if (compareVersions(version, "0.4.0") < 0) {
        throw new CniError(
          ErrCode.IncompatibleVersion,
          "config version does not allow CHECK",
          `config is "${version}"`,
        );
      }
      await plugin.check(call);
      return null;
    case "STATUS":
      if (compareVersions(version, "1.1.0") < 0) {
        throw new CniError(
          ErrCode.IncompatibleVersion,
          "config version does not allow STATUS",
          `config is "${version}"`,
        );
      }
      await plugin.status(call);
      return null;
    case "GC":
      if (compareVersions(version, "1.1.0") < 0) {
        throw new CniError(
          ErrCode.IncompatibleVersion,
          "config version does not allow GC",
          `config is "${version}"`,
        );
      }
      await plugin.gc(call);
      return null;
    default:
      throw new CniError(ErrCode.InvalidEnv, `unknown CNI_COMMAND: ${args.command}`);
  }
}

/**
 * DEL is best-effort cleanup: a config every ADD would refuse (not JSON, no valid name, a version we do not
 * speak) made nothing to remove, so DEL succeeds on it (stderr says why), instead of failing for ever and
 * leaving the runtime unable to remove the sandbox. The environment is still checked (a runtime bug), and the
 * plugin's own DEL reads a refused config leniently (only what cleanup needs). `onDeleted` runs only after
 * the plugin's DEL succeeded on an accepted config (lib/cni/deleted.ts).
 */
async function invokeDel(plugin: Plugin, args: CmdArgs, onDeleted?: () => void): Promise<null> {
  checkCommand(args);
  let parsed: { conf: Record<string, unknown>; version: string };
  try {
    parsed = parseNetConf(args.stdin, plugin.shape);
    checkVersion(parsed.version);
  } catch (e) {
    if (!(e instanceof CniError)) throw e;
    log("cni", `DEL: the config is one ADD refuses (${e.message}): nothing to clean up`);
    return null;
  }
  await plugin.del({ args, conf: parsed.conf, version: parsed.version });
  onDeleted?.();
  return null;
}

/** The cniVersion to put in an error: the config's when it is one we support, else ours. */
export function errorVersion(stdin: string): string {
  try {
    const v = JSON.parse(stdin)?.cniVersion;
    if (typeof v === "string") {
      checkVersion(v);
      return v;
    }
  } catch { /* fall through */ }
  return CURRENT_VERSION;
}

/**
 * The most stdin a plugin reads (the network config with prevResult, or GC's attachment list): 16 MiB, far
 * beyond any real one (a few KiB; GC's list of a node's attachments a few hundred KiB). The reference skel
 * reads without a cap; we refuse more, so a huge or endless stdin cannot exhaust memory.
 */
export const MAX_STDIN_BYTES = 16 * 1024 * 1024;

function readAllStdin(): string {
  try {
    return new TextDecoder().decode(
      readCappedStream((b) => Deno.stdin.readSync(b), "stdin", MAX_STDIN_BYTES),
    );
  } catch (e) {
    if (!(e instanceof CappedReadError)) throw e;
    throw new CniError(
      ErrCode.IOFailure,
      "stdin too large",
      `the network config on stdin has more than ${MAX_STDIN_BYTES} bytes (16 MiB, the limit): pass the config, not a stream`,
    );
  }
}

function writeOut(s: string): void {
  const data = new TextEncoder().encode(s);
  let off = 0;
  while (off < data.length) off += Deno.stdout.writeSync(data.subarray(off));
}

const TRACE = Deno.env.get("FLANCTL_CNI_TRACE") === "1";

/**
 * With FLANCTL_CNI_TRACE=1: prints `label`, the ms since the runtime started and the wall-clock time (epoch
 * ms, sub-ms) on stderr, so a caller that noted when it spawned us sees where the time goes.
 */
export function trace(label: string): void {
  if (TRACE) {
    const now = performance.now();
    Deno.stderr.writeSync(
      new TextEncoder().encode(
        `trace ${now.toFixed(1)} ms ${label} @${(performance.timeOrigin + now).toFixed(2)}\n`,
      ),
    );
  }
}

/** Logs to stderr (never stdout, which carries the result). */
export function log(plugin: string, msg: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`flanctl ${plugin}: ${msg}\n`));
}

/**
 * Runs `plugin` as a CNI executable: env + stdin in, result or error JSON on stdout, exit code out.
 */
export async function runExecutable(name: string, load: () => Promise<Plugin>): Promise<number> {
  let stdin = "";
  let record: DeletedRecord | null = null;
  trace(`start ${name}`);
  try {
    const command = Deno.env.get("CNI_COMMAND");
    const envCheck = readEnv((k) => Deno.env.get(k), "");
    if (command !== "VERSION") {
      try {
        stdin = readAllStdin();
      } catch (e) {
        if (e instanceof CniError) throw e;
        throw new CniError(ErrCode.IOFailure, "error reading from stdin", (e as Error).message);
      }
    }
    envCheck.stdin = stdin;
    record = openDeletedRecord(name, envCheck);
    const plugin = command === "VERSION" ? NO_PLUGIN : await load();
    trace("plugin loaded");
    const out = await invoke(plugin, envCheck, () => record?.markDeleted());
    if (out) writeOut(JSON.stringify(out) + "\n");
    trace("done");
    return 0;
  } catch (e) {
    const err = toCniError(e);
    if (err.code === ErrCode.Internal && e instanceof Error && !(e instanceof CniError)) {
      log(name, e.stack ?? e.message);
    }
    writeOut(JSON.stringify(err.toWire(errorVersion(stdin))) + "\n");
    return 1;
  } finally {
    record?.close();
  }
}

/**
 * With a launcher's records directory ({@link DELETED_DIR_ENV}), the locked record of plugin `name`'s
 * attachment for an ADD (emptied here, before anything else happens; filled again when it succeeds having
 * made nothing) or a DEL (filled when it succeeds);
 * null otherwise. An ADD that finds a record it cannot empty fails: a later DEL would be skipped.
 */
function openDeletedRecord(name: string, a: CmdArgs): DeletedRecord | null {
  const dir = Deno.env.get(DELETED_DIR_ENV);
  if (!dir || (a.command !== "ADD" && a.command !== "DEL")) return null;
  const rn = recordName(name, a.containerId, a.ifname);
  if (!rn) return null;
  const rec = openRecord(dir, rn);
  if (a.command === "ADD") {
    try {
      if (rec) rec.clear();
      else if (Deno.statSync(`${dir}/${rn}`).size > 0) throw new Error("cannot open it");
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return rec;
      rec?.close();
      throw new CniError(
        ErrCode.IOFailure,
        "cannot clear the deleted record",
        `${dir}/${rn}: ${(e as Error).message}; a later DEL would skip this attachment`,
      );
    }
  }
  return rec;
}

const unreachable = () => Promise.reject(new CniError(ErrCode.Internal, "not reached"));
const NO_PLUGIN: Plugin = {
  add: unreachable,
  del: unreachable,
  check: unreachable,
  status: unreachable,
  gc: unreachable,
};
