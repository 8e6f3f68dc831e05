/**
 * The nftables driver: nft command text, one buffer per change (libnftables commits a buffer as one
 * kernel transaction). Runs through libnftables by FFI (lib/sys/nftables.ts), so no process is spawned
 * per change; where the library is missing it falls back to the `nft` binary (`nft -f -`) and logs that
 * once.
 * @module
 */
import { nftLibrary, type NftRunOptions } from "../os/nftables.ts";
import { denoRunner, FirewallError, type Runner } from "./types.ts";
import { type Log, quietLog } from "../base/log.ts";

/** Runs nft command text: returns the output; throws FirewallError with nft's error text. */
export interface NftDriver {
  /** Which implementation runs the commands. */
  readonly via: "libnftables" | "nft";
  run(text: string, opts?: NftRunOptions): Promise<string>;
}

/**
 * A failed nft command. nft (binary and libnftables alike) reports no errno, only its text, so the driver
 * reads that text once, here, and callers match the type and {@link NftError.notFound}.
 */
export class NftError extends FirewallError {
  /** ENOENT: a table, chain or set named in the command is not there. */
  readonly notFound: boolean;
  constructor(tool: "libnftables" | "nft", text: string) {
    super(tool, `nft: ${text}`);
    this.notFound = /No such file or directory|does not exist/.test(text);
  }
}

/** True for the driver's ENOENT error: a table/chain that is not there. */
export function isNotFound(e: unknown): boolean {
  return e instanceof NftError && e.notFound;
}

let warned = false;

/**
 * The driver: libnftables when it loads, else the `nft` binary (logged once per process, since each change
 * then costs a process start).
 */
export function nftDriver(
  opts: { log?: Pick<Log, "info" | "warn">; run?: Runner; forceBinary?: boolean } = {},
): NftDriver {
  const lib = opts.forceBinary ? null : nftLibrary();
  if (lib) {
    return {
      via: "libnftables",
      run(text, o) {
        const r = lib.run(text, o);
        if (r.rc !== 0) {
          return Promise.reject(
            new NftError("libnftables", r.error.trim() || `rc ${r.rc}`),
          );
        }
        return Promise.resolve(r.output);
      },
    };
  }
  const run = opts.run ?? denoRunner;
  if (!warned && !opts.forceBinary) {
    warned = true;
    (opts.log ?? quietLog).warn(
      "libnftables.so.1 not found: running the nft binary per change (install Debian package libnftables1)",
    );
  }
  return {
    via: "nft",
    async run(text, o = {}) {
      const args = ["nft", ...(o.json ? ["-j"] : []), ...(o.handles ? ["-a"] : []), "-f", "-"];
      const r = await run(args, text);
      if (r.code !== 0) throw new NftError("nft", r.stderr.trim() || `exit ${r.code}`);
      return r.stdout;
    },
  };
}

/** Quotes a string for nft (comments). */
export function nftQuote(s: string): string {
  return `"${s.replace(/["\\]/g, "")}"`;
}
