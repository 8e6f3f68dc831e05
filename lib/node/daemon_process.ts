/**
 * The one process scan for a running daemon: a flanctl daemon or flanneld whose network namespace is the
 * one asked about. `flanctl reset` refuses while one runs in its namespace; `doctor` and `status` fall back
 * to it when there is no state file (flanneld, an older flanctl) or its pid cannot be checked (a daemon in
 * a container). One argv rule ({@link isDaemonArgv}) and one namespace comparison (device and inode of the
 * `ns/net` files, as namespaces(7) says to compare them), so both commands answer alike for one process.
 * @module
 */
import { netnsIdentity } from "../base/netns_id.ts";
import { safeText } from "../base/capped_read.ts";

/** A daemon process found by {@link findDaemonProcess}. */
export interface DaemonProcess {
  pid: number;
  /** Its command line, control characters escaped; past 120 characters cut, then `… (N chars)` appended. */
  cmd: string;
}

/** The network namespace of this thread (a netns switch is per thread: not `/proc/self`). */
export const OWN_NETNS = "/proc/thread-self/ns/net";

const base = (p: string | undefined): string => p?.slice(p.lastIndexOf("/") + 1) ?? "";

/** The script `deno run` runs: the first argument after `run` that names a module (flag values do not). */
function denoScript(argv: readonly string[]): { script: string; args: readonly string[] } | null {
  if (!base(argv[0]).startsWith("deno")) return null;
  const run = argv.indexOf("run");
  if (run < 0) return null;
  const i = argv.findIndex((a, j) => j > run && !a.startsWith("-") && /\.(ts|js|mts|mjs)$/.test(a));
  return i < 0 ? null : { script: base(argv[i]), args: argv.slice(i + 1) };
}

/**
 * Whether a command line is a running daemon, by how each way of starting one looks in /proc:
 * - flannel's `flanneld`, or the compiled flanctl invoked under that name (argv[0] `…/flanneld`);
 * - the compiled flanctl: `…/flanctl daemon …` (main.ts takes `daemon` only as the first argument);
 * - Deno running this project: `deno run … main.ts daemon …` (a checkout, `deno task flanctl`, the lab,
 *   install.sh's launcher when it has no bundle), or the daemon bundle `… daemon.js …` that install.sh's
 *   launcher and the image run for `flanctl daemon` and `flanneld` (its arguments have no `daemon` verb),
 *   or its source `cli/daemon_entry.ts`.
 *
 * Only the program (and the script Deno runs) count, not any argument: `tail -f /var/log/flanneld`,
 * `sudo flanctl daemon` (sudo's own process; its child is the daemon) or `flanctl doctor --netns daemon`
 * are not daemons.
 */
export function isDaemonArgv(argv: readonly string[]): boolean {
  const prog = base(argv[0]);
  if (prog === "flanneld") return true;
  if (prog.startsWith("flanctl")) return argv[1] === "daemon";
  const s = denoScript(argv);
  if (!s) return false;
  if (s.script === "daemon.js" || s.script === "daemon_entry.ts") return true;
  return s.script === "main.ts" && s.args[0] === "daemon";
}

/**
 * The first daemon process ({@link isDaemonArgv}) by pid whose network namespace is the one of `netns` (a
 * namespace file: {@link OWN_NETNS}, or lib/base/netns_id.ts's `netnsPath`), this process excepted; null
 * when there is none or `netns` cannot be read. `proc` is the proc file system's mount point (tests build a fake one).
 */
export function findDaemonProcess(netns: string, proc = "/proc", self = Deno.pid): DaemonProcess | null {
  const want = netnsIdentity(netns);
  if (want === null) return null;
  let pids: number[];
  try {
    pids = [...Deno.readDirSync(proc)].filter((e) => /^\d+$/.test(e.name)).map((e) => Number(e.name));
  } catch {
    return null;
  }
  for (const pid of pids.sort((a, b) => a - b)) {
    if (pid === self) continue;
    let argv: string[];
    try {
      // NUL-terminated arguments (an empty one stays in its place); a zombie's is empty.
      argv = Deno.readTextFileSync(`${proc}/${pid}/cmdline`).split("\0");
    } catch {
      continue; // gone, or not ours to read
    }
    if (argv.at(-1) === "") argv.pop();
    if (!isDaemonArgv(argv) || netnsIdentity(`${proc}/${pid}/ns/net`) !== want) continue;
    return { pid, cmd: safeText(argv.join(" "), 120) };
  }
  return null;
}
