/**
 * Reading a file the product did not write itself (subnet.env, CNI conflists, saved delegate configs,
 * host-local records, certificates, net-conf files, /proc and /sys values) without hanging on a FIFO or a
 * device, or growing without bound on /dev/zero: stat first and refuse anything that is not a regular
 * file, open, check with fstat that the open file is still that regular file, and read at most `maxBytes`
 * (a file that has more is refused, not truncated). /proc and /sys files report size 0; they are read up
 * to the cap too.
 *
 * A symlink is followed only to a file inside the link's own directory (a Kubernetes ConfigMap or Secret
 * mount's `..data/` links, an installer's `x -> x.v2`): a symlinked `/run/flannel/subnet.env` pointing at
 * `/etc/shadow` is refused, never read (and so never printed or copied). Callers that can never expect a
 * symlink refuse them all (`symlinks: "none"`). /proc and /sys paths are exempt (their own links).
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
export type CappedReadReason = "not-regular" | "too-large" | "symlink";

/**
 * Which symlinks a read follows: "same-dir" (default) only one whose target (all links resolved) lies in
 * the link's own directory or below; "none" refuses every symlink (O_NOFOLLOW's effect).
 */
export type SymlinkPolicy = "same-dir" | "none";

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

/** The directory part of `path` ("." for a bare name). */
function dirOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i < 0 ? "." : i === 0 ? "/" : path.slice(0, i);
}

/**
 * Throws {@link CappedReadError} (`symlink`) when `path` is a symlink that `policy` does not follow (see
 * {@link SymlinkPolicy}); the message names the link's directory, never the target or its contents.
 */
export function checkSymlink(path: string, policy: SymlinkPolicy = "same-dir"): void {
  if (/^\/(proc|sys)\//.test(path) || !Deno.lstatSync(path).isSymlink) return;
  const dir = dirOf(path);
  if (policy === "none") {
    throw new CappedReadError(path, "symlink", "is a symlink, refused (the file itself is expected here)");
  }
  const real = Deno.realPathSync(path), realDir = Deno.realPathSync(dir);
  if (!real.startsWith(realDir === "/" ? "/" : `${realDir}/`)) {
    throw new CappedReadError(
      path,
      "symlink",
      `is a symlink to a file outside ${dir}, refused (replace it with the file itself)`,
    );
  }
}

/**
 * Reads `path` as bytes (see the module doc). Throws Deno.errors.NotFound (and the other Deno errors) as
 * Deno.readFileSync would, and {@link CappedReadError} for a non-regular or oversized file, or a symlink
 * `symlinks` does not follow.
 */
export function readCappedBytes(
  path: string,
  maxBytes: number = DEFAULT_MAX_BYTES,
  symlinks: SymlinkPolicy = "same-dir",
): Uint8Array {
  checkSymlink(path, symlinks);
  const st = Deno.statSync(path);
  checkRegular(path, st, maxBytes);
  const f = Deno.openSync(path, { read: true });
  try {
    const fst = f.statSync();
    checkRegular(path, fst, maxBytes);
    if (!/^\/(proc|sys)\//.test(path) && (fst.ino !== st.ino || fst.dev !== st.dev)) {
      throw new CappedReadError(path, "symlink", "was replaced while being opened, refused");
    }
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
export function readCappedText(
  path: string,
  maxBytes: number = DEFAULT_MAX_BYTES,
  symlinks: SymlinkPolicy = "same-dir",
): string {
  return new TextDecoder().decode(readCappedBytes(path, maxBytes, symlinks));
}

/** The async form (same checks; the read itself is small and bounded). */
export function readCappedTextAsync(
  path: string,
  maxBytes: number = DEFAULT_MAX_BYTES,
  symlinks: SymlinkPolicy = "same-dir",
): Promise<string> {
  try {
    return Promise.resolve(readCappedText(path, maxBytes, symlinks));
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

/** Most bytes of a file's content an error message or report may quote ({@link excerpt}). */
export const EXCERPT_MAX = 24;

/**
 * A short, printable excerpt of untrusted text (a line of a file that did not parse) for an error
 * message: at most {@link EXCERPT_MAX} characters, control characters and non-ASCII escaped, quoted, with
 * `…` when cut — never more of a file than that, whatever it holds.
 */
export function excerpt(text: string, max = EXCERPT_MAX): string {
  const cut = text.length > max;
  const head = [...text.slice(0, max)].map((c) => {
    const n = c.charCodeAt(0);
    return n < 0x20 || n > 0x7e || c === "'" || c === "\\" ? `\\x${n.toString(16).padStart(2, "0")}` : c;
  }).join("");
  return `'${head}'${cut ? "…" : ""}`;
}

/**
 * Untrusted text (a server's, a store's) made safe to log: control characters escaped, at most `max`
 * characters (an error body or message from an untrusted server is never printed raw).
 */
export function safeText(s: string, max = 300): string {
  const t = s.replace(
    // deno-lint-ignore no-control-regex
    /[\u0000-\u001f\u007f-\u009f]/g,
    (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`,
  );
  return t.length > max ? `${t.slice(0, max)}… (${s.length} chars)` : t;
}

/** A value of untrusted input as JSON text for a message: bounded and escaped as {@link safeText}. */
export function safeJson(v: unknown, max = 120): string {
  return safeText(JSON.stringify(v) ?? String(v), max);
}
