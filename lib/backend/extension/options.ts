/**
 * The extension backend's net-conf options (flannel pkg/backend/extension, v0.28.10): four command lines,
 * `PreStartupCommand`, `PostStartupCommand`, `SubnetAddCommand`, `SubnetRemoveCommand` (keys matched as
 * Go's JSON decoding matches them: exact, else case-insensitive). flanneld has no IPv6 twins of these keys:
 * the IPv6 values reach the commands as environment variables (docs/daemon.md). net-conf is read from the
 * store, so each command is bounded and checked before anything runs: at most {@link MAX_COMMAND_CHARS}
 * characters and {@link MAX_COMMAND_FIELDS} fields, no NUL, not only white space (flanneld panics on that).
 * @module
 */
import { ConfigError } from "../../config/netconf.ts";
import type { BackendConfig } from "../../config/types.ts";
import { safeJson } from "../../base/capped_read.ts";
import { goFields } from "./expand.ts";

/** The longest command line accepted (characters). */
export const MAX_COMMAND_CHARS = 4096;
/** The most fields (program and arguments) a command line may have. */
export const MAX_COMMAND_FIELDS = 128;

/** The command keys, in the order flanneld runs them. */
export const COMMAND_KEYS = [
  "PreStartupCommand",
  "PostStartupCommand",
  "SubnetAddCommand",
  "SubnetRemoveCommand",
] as const;

/** One of the extension backend's commands. */
export type CommandKey = typeof COMMAND_KEYS[number];

/** The configured commands (absent: not configured, as flanneld's empty string). */
export type ExtensionOptions = Partial<Record<CommandKey, string>>;

function pick(raw: Record<string, unknown>, name: string): unknown {
  if (Object.hasOwn(raw, name)) return raw[name];
  const k = Object.keys(raw).find((x) => x.toLowerCase() === name.toLowerCase());
  return k === undefined ? undefined : raw[k];
}

/** Parses and checks the commands of `Backend` (throws {@link ConfigError} naming the key). */
export function parseExtensionOptions(b: BackendConfig): ExtensionOptions {
  const out: ExtensionOptions = {};
  for (const key of COMMAND_KEYS) {
    const v = pick(b.raw, key);
    if (v === undefined || v === null || v === "") continue;
    const field = `Backend.${key}`;
    if (typeof v !== "string") throw new ConfigError(field, `${field} must be a string, got ${safeJson(v)}`);
    if (v.length > MAX_COMMAND_CHARS) {
      throw new ConfigError(field, `${field} is ${v.length} characters long: at most ${MAX_COMMAND_CHARS}`);
    }
    if (v.includes("\0")) throw new ConfigError(field, `${field} contains a NUL character`);
    const fields = goFields(v);
    if (fields.length === 0) {
      throw new ConfigError(field, `${field} is only white space: give a program and its arguments`);
    }
    if (fields.length > MAX_COMMAND_FIELDS) {
      throw new ConfigError(
        field,
        `${field} has ${fields.length} arguments: at most ${MAX_COMMAND_FIELDS}`,
      );
    }
    out[key] = v;
  }
  return out;
}

/** The variable that sets the commands' timeout (seconds, 1 to 3600). */
export const TIMEOUT_ENV = "FLANCTL_EXTENSION_COMMAND_TIMEOUT_SECONDS";

/**
 * The commands' timeout in milliseconds from `value` (the {@link TIMEOUT_ENV} variable), or `dflt` when
 * unset; throws {@link ConfigError} for anything but whole seconds from 1 to 3600.
 */
export function commandTimeoutMs(value: string | undefined, dflt: number): number {
  if (value === undefined || value === "") return dflt;
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || n < 1 || n > 3600) {
    throw new ConfigError(
      TIMEOUT_ENV,
      `${TIMEOUT_ENV}=${safeJson(value)}: give whole seconds from 1 to 3600`,
    );
  }
  return n * 1000;
}
