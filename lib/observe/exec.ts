/**
 * Runs read-only commands (iptables-save, ethtool, ip, ping) through lib/base/run.ts in the checked namespace, and reads
 * files from the checked namespace's view of /proc/sys. With `--netns` commands go through
 * `ip netns exec NAME` and files are read with the thread switched into the namespace (`inNetns`);
 * without it both happen here.
 * @module
 */
import { inNetns } from "../os/mod.ts";
import { readCappedText } from "../base/capped_read.ts";
import { runProcess } from "../base/run.ts";

/** Output of a finished command. `code` is null when the binary was not found. */
export interface ExecResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Executes commands in one namespace (or the current one when `netns` is null). */
export class NsExec {
  constructor(readonly netns: string | null) {}

  /** Runs `cmd` (inside the namespace); never throws. `code` null = command not found. */
  async run(cmd: string[], timeoutMs = 10_000): Promise<ExecResult> {
    const argv = this.netns ? ["ip", "netns", "exec", this.netns, ...cmd] : cmd;
    if (!which(cmd[0])) return { code: null, stdout: "", stderr: `${cmd[0]}: not found` };
    try {
      // The timeout bounds probes and HTTP calls so a hung peer never hangs the doctor.
      const r = await runProcess(argv, { timeoutMs });
      // A killed command answers as `timeout` did: exit 124.
      return { code: r.timedOut ? 124 : r.code, stdout: r.stdout, stderr: r.stderr };
    } catch (e) {
      return { code: null, stdout: "", stderr: (e as Error).message };
    }
  }

  /**
   * Reads small text files as seen from the namespace (for /proc/sys/net the namespace matters).
   * Missing/unreadable files map to null. One process for all files when a netns is involved.
   */
  async readFiles(paths: string[]): Promise<Map<string, string | null>> {
    const out = new Map<string, string | null>();
    const readAll = () => {
      for (const p of paths) {
        try {
          out.set(p, readCappedText(p, 64 * 1024).trim());
        } catch {
          out.set(p, null);
        }
      }
      return out;
    };
    if (!this.netns) return readAll();
    // /proc/sys/net answers for the namespace of the thread that opens the file: read everything with the
    // thread switched into the netns (no process per read). A shell inside the netns is the fallback.
    try {
      return inNetns({ name: this.netns }, readAll);
    } catch {
      out.clear();
    }
    for (const p of paths) out.set(p, null);
    const script = 'for f in "$@"; do if v=$(cat "$f" 2>/dev/null); then printf "%s\\t%s\\n" "$f" "$v" ' +
      '| tr "\\n" " "; echo; fi; done';
    const r = await this.run(["sh", "-c", script, "sh", ...paths]);
    for (const line of r.stdout.split("\n")) {
      const tab = line.indexOf("\t");
      if (tab > 0) out.set(line.slice(0, tab), line.slice(tab + 1).trim());
    }
    return out;
  }
}

const whichCache = new Map<string, string | null>();

/** Absolute path of an executable found in PATH (or the /usr/sbin, /sbin dirs), or null. */
export function which(bin: string): string | null {
  if (bin.includes("/")) return exists(bin) ? bin : null;
  if (whichCache.has(bin)) return whichCache.get(bin)!;
  const dirs = [...(Deno.env.get("PATH") ?? "").split(":"), "/usr/sbin", "/sbin", "/usr/bin", "/bin"];
  let found: string | null = null;
  for (const d of dirs) {
    if (d && exists(`${d}/${bin}`)) {
      found = `${d}/${bin}`;
      break;
    }
  }
  whichCache.set(bin, found);
  return found;
}

function exists(p: string): boolean {
  try {
    return Deno.statSync(p).isFile;
  } catch {
    return false;
  }
}
