/**
 * `flanctl lab logs NODE [-f]`: a node's daemon log (`<lab dir>/<node>/daemon.log`), whole, or followed as
 * it grows (`-f`, until the signal aborts). Read-only; the caller prints.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import type { LabState } from "./types.ts";
import { sleep } from "../base/sleep.ts";

/** A node name that is not in the lab. */
export class LabNodeNotFoundError extends FlanctlError {
  constructor(lab: string, node: string, known: string[]) {
    super(`lab '${lab}' has no node '${node}'; nodes: ${known.join(", ") || "none"}`, 1);
  }
}

/** The daemon log of node `node`. Throws {@link LabNodeNotFoundError}. */
export function daemonLogPath(s: LabState, node: string): string {
  const n = s.nodes.find((x) => x.name === node);
  if (!n) throw new LabNodeNotFoundError(s.name, node, s.nodes.map((x) => x.name));
  return `${n.dir}/daemon.log`;
}

/**
 * Writes the log at `path` to `write`; with `follow`, keeps writing what is appended (polling every
 * `pollMs`; a truncated file is read again from its start) until `signal` aborts.
 */
export async function copyLog(
  path: string,
  write: (chunk: Uint8Array) => Promise<unknown>,
  opts: { follow?: boolean; signal?: AbortSignal; pollMs?: number } = {},
): Promise<void> {
  let f: Deno.FsFile;
  try {
    f = await Deno.open(path, { read: true });
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new FlanctlError(`${path}: no daemon log yet (the daemon was never started)`, 1);
    }
    throw e;
  }
  const buf = new Uint8Array(64 * 1024);
  let offset = 0;
  try {
    for (;;) {
      const n = await f.read(buf);
      if (n !== null && n > 0) {
        offset += n;
        await write(buf.slice(0, n));
        continue;
      }
      if (!opts.follow || opts.signal?.aborted) return;
      if ((await f.stat()).size < offset) {
        await f.seek(0, Deno.SeekMode.Start);
        offset = 0;
        continue;
      }
      await sleep(opts.pollMs ?? 250, opts.signal);
      if (opts.signal?.aborted) return;
    }
  } finally {
    f.close();
  }
}
