/**
 * Reading a file the product did not write itself (subnet.env, CNI conflists, saved delegate configs,
 * host-local records, certificates, net-conf files, /proc and /sys values) without hanging on a FIFO or a
 * device, or growing without bound on /dev/zero: stat first and refuse anything that is not a regular
 * file, open, check with fstat that the open file is still that regular file, and read at most `maxBytes`
 * (a file that has more is refused, not truncated). /proc and /sys files report size 0; they are read up
 * to the cap too.
 *
 * Why not O_NONBLOCK: Deno.open has no flags argument, and node:fs (which has) costs tens of ms of module
 * loading on every CNI call (docs/performance.md, "Smaller figures"). The stat → open → fstat sequence only
 * blocks if the path is swapped for a FIFO between stat and open, which needs write access to its directory
 * (root's, for every path we read).
 * @module
 */
import { FlanctlError } from "./errors.ts";

/** Default cap: configs and state files are a few KiB; 4 MiB is far beyond any real one. */
export const DEFAULT_MAX_BYTES = 4 * 1024 * 1024;

/** Why a file was refused. */
export type CappedReadReason = "not-regular" | "too-large";

/** The file exists but is not a readable regular file within the size cap. Missing files throw NotFound. */
export class CappedReadError extends FlanctlError {
  /** The file. */
  readonly path: string;
  /** What was wrong. */
  readonly reason: CappedReadReason;
  constructor(path: string, reason: CappedReadReason, detail: string) {
    super(`${path}: ${detail}`, 1);
    this.path = path;
    this.reason = reason;
  }
}

function kindOf(st: Deno.FileInfo): string {
  if (st.isDirectory) return "a directory";
  if (st.isFifo) return "a FIFO";
  if (st.isCharDevice) return "a character device";
  if (st.isBlockDevice) return "a block device";
  if (st.isSocket) return "a socket";
  return "not a regular file";
}

function checkRegular(path: string, st: Deno.FileInfo, maxBytes: number): void {
  if (!st.isFile) {
    throw new CappedReadError(path, "not-regular", `is ${kindOf(st)}, not a regular file`);
  }
  if (st.size > maxBytes) {
    throw new CappedReadError(path, "too-large", `is ${st.size} bytes, more than the ${maxBytes} allowed`);
  }
}

/**
 * Reads `path` as bytes (see the module doc). Throws Deno.errors.NotFound (and the other Deno errors) as
 * Deno.readFileSync would, and {@link CappedReadError} for a non-regular or oversized file.
 */
export function readCappedBytes(path: string, maxBytes: number = DEFAULT_MAX_BYTES): Uint8Array {
  checkRegular(path, Deno.statSync(path), maxBytes);
  const f = Deno.openSync(path, { read: true });
  try {
    checkRegular(path, f.statSync(), maxBytes);
    return readCappedStream((b) => f.readSync(b), path, maxBytes);
  } finally {
    f.close();
  }
}

/**
 * Reads a stream to its end through `read` (e.g. `(b) => Deno.stdin.readSync(b)`), at most `maxBytes`:
 * one byte more and it stops reading and throws {@link CappedReadError} (`too-large`) naming `what`, so an
 * endless or huge input (stdin from /dev/zero) costs at most `maxBytes` of memory.
 */
export function readCappedStream(
  read: (buf: Uint8Array) => number | null,
  what: string,
  maxBytes: number = DEFAULT_MAX_BYTES,
): Uint8Array {
  const chunks: Uint8Array[] = [];
  const buf = new Uint8Array(65536);
  let total = 0;
  for (;;) {
    const n = read(buf);
    if (n === null || n === 0) break;
    total += n;
    if (total > maxBytes) {
      throw new CappedReadError(what, "too-large", `has more than the ${maxBytes} bytes allowed`);
    }
    chunks.push(buf.slice(0, n));
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/** {@link readCappedBytes} decoded as UTF-8. */
export function readCappedText(path: string, maxBytes: number = DEFAULT_MAX_BYTES): string {
  return new TextDecoder().decode(readCappedBytes(path, maxBytes));
}

/** The async form (same checks; the read itself is small and bounded). */
export function readCappedTextAsync(path: string, maxBytes: number = DEFAULT_MAX_BYTES): Promise<string> {
  try {
    return Promise.resolve(readCappedText(path, maxBytes));
  } catch (e) {
    return Promise.reject(e);
  }
}

/**
 * Checks that `path` can be a namespace file (nsfs bind mounts and /proc/<pid>/ns/net stat as regular
 * files): exists and is not a FIFO, device, socket or directory. Throws NotFound or {@link CappedReadError}.
 */
export function checkNsFile(path: string): void {
  const st = Deno.statSync(path);
  if (!st.isFile) throw new CappedReadError(path, "not-regular", `is ${kindOf(st)}, not a namespace file`);
}
