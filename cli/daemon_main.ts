/**
 * The daemon path: main.ts calls {@link daemonMain} for `flanctl daemon …` (and when flanctl is invoked as
 * `flanneld`) without loading the command tree, so commander never costs the long-running daemon start-up
 * time or memory. Flags are flanneld's, in Go flag syntax (lib/daemon/options.ts).
 * @module
 */
import { FlanctlError } from "../lib/base/errors.ts";
import { daemonHelp, parseDaemonArgs } from "../lib/daemon/options.ts";
import { VERSION } from "../lib/base/version.ts";

function write(fd: { writeSync(p: Uint8Array): number }, s: string): void {
  const b = new TextEncoder().encode(s);
  for (let off = 0; off < b.length;) off += fd.writeSync(b.subarray(off));
}

/** Runs the daemon with flanneld-style `argv` and returns the exit code (2 for usage errors). */
export async function daemonMain(argv: readonly string[]): Promise<number> {
  try {
    const a = parseDaemonArgs(argv);
    if (a.help) {
      write(Deno.stdout, daemonHelp());
      return 0;
    }
    if (a.version) {
      write(Deno.stdout, `${VERSION}\n`);
      return 0;
    }
    const { runDaemon } = await import("../lib/daemon/run.ts");
    // A normal return is a clean stop; fatal errors are thrown.
    return await runDaemon(a.daemon, a.store);
  } catch (e) {
    if (e instanceof FlanctlError) {
      write(Deno.stderr, `flanctl: ${e.message}\n`);
      return e.exitCode;
    }
    write(Deno.stderr, `flanctl: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    return 1;
  }
}
