/**
 * The CNI protocol as a plugin sees it (spec 1.1.0): error codes and the error type, the invocation
 * environment validated the way the reference library (pkg/skel) does, CNI_ARGS, and version checks.
 * Hand-written: there is no npm package for the CNI protocol, and every CNI call loads this module, so it
 * stays small and dependency-free.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { isObj } from "../base/json.ts";
import { goFold, NET_CONF, type Shape } from "./gojson.ts";

/** The newest spec version we speak. */
export const CURRENT_VERSION = "1.1.0";
/** Every version whose config and result shapes we accept and produce. */
export const SUPPORTED_VERSIONS = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"] as const;

/** Spec error codes (SPEC.md "Error"), plus flanctl's plugin-specific codes (100+). */
export const ErrCode = {
  IncompatibleVersion: 1,
  UnsupportedField: 2,
  UnknownContainer: 3,
  InvalidEnv: 4,
  IOFailure: 5,
  DecodingFailure: 6,
  InvalidNetworkConfig: 7,
  TryAgainLater: 11,
  PluginNotAvailable: 50,
  PluginNotAvailableLimited: 51,
  /** IPAM: no free address, or a requested address is taken/outside every range. */
  NoAddress: 100,
  /** A second ADD for the same container and interface, or the interface already exists. */
  AlreadyExists: 101,
  /** A delegate plugin type was not found in CNI_PATH. */
  PluginNotFound: 102,
  /** A kernel (netlink/sysctl) operation failed. */
  KernelFailure: 103,
  /** iptables failed. */
  IptablesFailure: 104,
  /** CHECK found a difference from what ADD made. */
  CheckFailed: 105,
  /** Anything unexpected (the reference library's ErrInternal). */
  Internal: 999,
} as const;

/** A CNI error: printed as `{cniVersion, code, msg, details}` on stdout, exit 1. */
export class CniError extends FlanctlError {
  /** Spec error code. */
  readonly code: number;
  /** Short message (the spec's `msg`). */
  readonly msg: string;
  /** Longer explanation (the spec's `details`). */
  readonly details: string;
  constructor(code: number, msg: string, details = "") {
    super(details ? `${msg}: ${details}` : msg, 1);
    this.code = code;
    this.msg = msg;
    this.details = details;
  }

  /** The spec's wire form. */
  toWire(cniVersion: string): CniErrorWire {
    return { cniVersion, code: this.code, msg: this.msg, details: this.details };
  }

  /** Rebuilds an error a delegate printed. */
  static fromWire(w: Partial<CniErrorWire>, fallbackMsg: string): CniError {
    const code = typeof w.code === "number" ? w.code : ErrCode.Internal;
    return new CniError(code, typeof w.msg === "string" ? w.msg : fallbackMsg, w.details ?? "");
  }
}

/** The JSON of an error on stdout. */
export interface CniErrorWire {
  cniVersion: string;
  code: number;
  msg: string;
  details: string;
}

/**
 * The thrower of one plugin's invalid-config errors (the spec's code 7, InvalidNetworkConfig): `msg` is the
 * short message (`invalid bridge config`), each call's argument the details. Keep it in a const declared
 * with its type (`const cfgErr: (details: string) => never = …`): TypeScript narrows after a call that never
 * returns only through a declared type.
 */
export function configError(msg: string): (details: string) => never {
  return (details) => {
    throw new CniError(ErrCode.InvalidNetworkConfig, msg, details);
  };
}

/** Turns anything thrown into a {@link CniError} (unknown errors become code 999 with their message). */
export function toCniError(e: unknown): CniError {
  if (e instanceof CniError) return e;
  if (e instanceof FlanctlError) return new CniError(ErrCode.Internal, e.message);
  if (e instanceof Error) return new CniError(ErrCode.Internal, e.message);
  return new CniError(ErrCode.Internal, String(e));
}

/** The verbs. */
export type CniCommand = "ADD" | "DEL" | "CHECK" | "STATUS" | "GC" | "VERSION";

/** Everything the runtime passed, after validation. */
export interface CmdArgs {
  command: CniCommand;
  containerId: string;
  netns: string;
  ifname: string;
  /** Raw CNI_ARGS. */
  args: string;
  /** CNI_PATH split on ':'. */
  path: string[];
  /** The network config text from stdin. */
  stdin: string;
}

/** Variables that must be non-empty, per verb (pkg/skel's table). */
const REQUIRED: Record<string, string[]> = {
  ADD: ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"],
  CHECK: ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"],
  DEL: ["CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"],
  GC: ["CNI_PATH"],
  STATUS: ["CNI_PATH"],
};

const ID_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$/;

/** Checks a container ID (error 4 as the reference). */
export function validateContainerId(id: string): void {
  if (id === "") throw new CniError(ErrCode.InvalidEnv, "missing containerID");
  if (!ID_RE.test(id)) throw new CniError(ErrCode.InvalidEnv, "invalid characters in containerID", id);
}

/** Why `name` is no interface name (the reference's message and details), or null when it is one. */
function ifNameProblem(name: string): [msg: string, details?: string] | null {
  if (name === "") return ["interface name is empty"];
  if (new TextEncoder().encode(name).length > 15) {
    return ["interface name is too long", "interface name should be less than 16 characters"];
  }
  if (name === "." || name === "..") return ["interface name is . or .."];
  if (/[/:\s]/.test(name)) return ["interface name contains / or : or whitespace characters"];
  return null;
}

/** Whether `name` is an interface name: ≤15 bytes, not . or .., no / : or whitespace (the kernel's rule). */
export function isIfName(name: string): boolean {
  return ifNameProblem(name) === null;
}

/** Checks an interface name as {@link isIfName} (error 4 with the reference's message when it is not one). */
export function validateIfName(name: string): void {
  const p = ifNameProblem(name);
  if (p) throw new CniError(ErrCode.InvalidEnv, ...p);
}

/** Checks a network name (error 7). */
export function validateNetworkName(name: unknown): string {
  if (name === undefined || name === null || name === "") {
    throw new CniError(ErrCode.InvalidNetworkConfig, "missing network name");
  }
  if (typeof name !== "string") {
    throw new CniError(
      ErrCode.DecodingFailure,
      "error unmarshall network config",
      "field 'name' must be a string",
    );
  }
  if (!ID_RE.test(name)) {
    throw new CniError(ErrCode.InvalidNetworkConfig, "invalid characters found in network name", name);
  }
  return name;
}

/**
 * Reads and validates the environment as pkg/skel does: CNI_COMMAND always required; the others per verb;
 * then container ID and interface name syntax for ADD/DEL/CHECK. Unknown verbs are error 4 (reported after
 * the config has been validated, as the reference does; see {@link checkCommand}).
 */
export function readEnv(get: (k: string) => string | undefined, stdin: string): CmdArgs {
  const v = (k: string) => get(k) ?? "";
  const command = v("CNI_COMMAND");
  const missing: string[] = [];
  if (command === "") missing.push("CNI_COMMAND");
  for (const k of Object.hasOwn(REQUIRED, command) ? REQUIRED[command] : []) if (v(k) === "") missing.push(k);
  if (missing.length) {
    // Keep the reference's order: COMMAND, CONTAINERID, NETNS, IFNAME, PATH.
    throw new CniError(ErrCode.InvalidEnv, `required env variables [${missing.join(",")}] missing`);
  }
  return {
    command: command as CniCommand,
    containerId: v("CNI_CONTAINERID"),
    netns: v("CNI_NETNS"),
    ifname: v("CNI_IFNAME"),
    args: v("CNI_ARGS"),
    path: v("CNI_PATH").split(":").filter(Boolean),
    stdin,
  };
}

/** Validates the verb and, for ADD/DEL/CHECK, the container ID and interface name. */
export function checkCommand(a: CmdArgs): void {
  if (!["ADD", "DEL", "CHECK", "STATUS", "GC", "VERSION"].includes(a.command)) {
    throw new CniError(ErrCode.InvalidEnv, `unknown CNI_COMMAND: ${a.command}`);
  }
  if (a.command === "ADD" || a.command === "DEL" || a.command === "CHECK") {
    validateContainerId(a.containerId);
    validateIfName(a.ifname);
  }
}

/** Parsed CNI_ARGS: known keys only (others rejected unless IgnoreUnknown). */
export type CniArgs = Record<string, string>;

/**
 * Parses `K=V;K2=V2` like types.LoadArgs: every pair needs `=`; `IgnoreUnknown` takes 1/true/0/false; a key
 * not in `known` is error 4 unless IgnoreUnknown is true.
 */
export function parseCniArgs(raw: string, known: readonly string[]): CniArgs {
  const out: CniArgs = {};
  if (raw === "") return out;
  const pairs: [string, string][] = [];
  for (const item of raw.split(";")) {
    const kv = item.split("=");
    if (kv.length !== 2) {
      throw new CniError(ErrCode.InvalidEnv, "invalid CNI_ARGS", `ARGS: invalid pair "${item}"`);
    }
    pairs.push([kv[0], kv[1]]);
  }
  let ignore = false;
  for (const [k, val] of pairs) {
    if (k !== "IgnoreUnknown") continue;
    const low = val.toLowerCase();
    if (low === "1" || low === "true") ignore = true;
    else if (low === "0" || low === "false") ignore = false;
    else {throw new CniError(
        ErrCode.InvalidEnv,
        "invalid CNI_ARGS",
        `IgnoreUnknown: boolean unmarshal error: invalid input ${val}`,
      );}
  }
  for (const [k, val] of pairs) {
    if (k === "IgnoreUnknown") continue;
    if (known.includes(k)) out[k] = val;
    else if (!ignore) {
      throw new CniError(
        ErrCode.InvalidEnv,
        "invalid CNI_ARGS",
        `ARGS: unknown key "${k}" (known: ${known.join(", ") || "none"}; add IgnoreUnknown=1 to ignore it)`,
      );
    }
  }
  return out;
}

/** Compares two dotted versions: negative, 0 or positive. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number), pb = b.split(".").map(Number);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d) return d;
  }
  return 0;
}

/**
 * Parses the config JSON enough to dispatch: must be an object (error 6), `name` valid (7), `cniVersion`
 * a string and one we support (1). Missing cniVersion means 0.1.0, as the spec says. The keys are matched
 * to `shape` (the plugin's Go struct) as encoding/json matches them (lib/cni/gojson.ts): `Name`, `HostPort`
 * and `hostport` read as `name` and `hostPort`.
 */
export function parseNetConf(
  stdin: string,
  shape: Shape = NET_CONF,
): { conf: Record<string, unknown>; version: string } {
  let conf: unknown;
  try {
    conf = JSON.parse(stdin);
  } catch (e) {
    throw new CniError(ErrCode.DecodingFailure, "error unmarshall network config", (e as Error).message);
  }
  if (!isObj(conf)) {
    throw new CniError(
      ErrCode.DecodingFailure,
      "error unmarshall network config",
      "the config must be a JSON object",
    );
  }
  checkDepth(conf);
  const c = goFold(conf, shape);
  const v = c.cniVersion;
  if (v !== undefined && typeof v !== "string") {
    throw new CniError(
      ErrCode.DecodingFailure,
      "error unmarshall network config",
      "field 'cniVersion' must be a string",
    );
  }
  validateNetworkName(c.name);
  const version = (v as string | undefined) || "0.1.0";
  return { conf: c, version };
}

/** The deepest nesting a config may have; real configs use fewer than 10 levels. */
export const MAX_CONFIG_DEPTH = 64;

/** Error 2 when `doc` nests deeper than {@link MAX_CONFIG_DEPTH} (checked without recursion). */
export function checkDepth(doc: unknown): void {
  const stack: [unknown, number][] = [[doc, 1]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== "object") continue;
    if (d > MAX_CONFIG_DEPTH) {
      throw new CniError(
        ErrCode.UnsupportedField,
        "network config nested too deeply",
        `more than ${MAX_CONFIG_DEPTH} levels of objects/arrays`,
      );
    }
    for (const v of Array.isArray(x) ? x : Object.values(x)) {
      if (v !== null && typeof v === "object") stack.push([v, d + 1]);
    }
  }
}

/** Error 1 unless `version` is one we support. */
export function checkVersion(version: string): void {
  if (!(SUPPORTED_VERSIONS as readonly string[]).includes(version)) {
    throw new CniError(
      ErrCode.IncompatibleVersion,
      "incompatible CNI versions",
      `config is "${version}", plugin supports ${JSON.stringify(SUPPORTED_VERSIONS)}`,
    );
  }
}

/** The VERSION answer. */
export function versionInfo(): { cniVersion: string; supportedVersions: string[] } {
  return { cniVersion: CURRENT_VERSION, supportedVersions: [...SUPPORTED_VERSIONS] };
}
