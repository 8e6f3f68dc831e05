/**
 * The firewall layer's shared types: the process runner (so tests and benches can substitute it), the
 * error every driver throws, and the small logger interface the layer reports through (it never prints).
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { CommandNotFoundError, runProcess } from "../base/run.ts";

/** An IP family. */
export type Family = 4 | 6;

/** Which kernel interface programs the rules. */
export type FirewallMode = "iptables" | "nftables";

/** iptables/nft is missing or refused our rules. `tool` names the program or library. */
export class FirewallError extends FlanctlError {
  /** The tool that failed (iptables-restore, ip6tables-save, libnftables, nft). */
  readonly tool: string;
  /** True when the tool itself is not installed. */
  readonly missing: boolean;
  constructor(tool: string, message: string, missing = false) {
    super(message, 1);
    this.tool = tool;
    this.missing = missing;
  }
}

/** Runs a command, returning exit code and output; throws FirewallError(missing) when it is not installed. */
export type Runner = (
  cmd: string[],
  stdin?: string,
) => Promise<{ code: number; stdout: string; stderr: string }>;

/** The default runner (lib/base/run.ts). */
export const denoRunner: Runner = async (cmd, stdin) => {
  try {
    const { code, stdout, stderr } = await runProcess(cmd, { stdin });
    return { code, stdout, stderr };
  } catch (e) {
    if (e instanceof CommandNotFoundError) {
      const pkg = cmd[0].startsWith("nft") ? "nftables" : "iptables";
      throw new FirewallError(cmd[0], `${cmd[0]} not found: install the ${pkg} package`, true);
    }
    throw e;
  }
};
