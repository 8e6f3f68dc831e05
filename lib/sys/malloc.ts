/**
 * Giving free C heap memory back to the kernel. The daemon's runtime allocates with glibc malloc (Deno's
 * Rust side, V8's array buffers, libnl): after a burst (thousands of leases from a watch, a full pass over
 * every route) the freed memory stays in malloc's free lists as resident pages, until malloc_trim gives them
 * back (measured: docs/performance.md, "malloc_trim and the binary's pages").
 * @module
 */
import { libc } from "./ffi.ts";

/**
 * Calls glibc's `malloc_trim(0)`: free pages of every malloc arena go back to the kernel (the live data
 * stays). Returns true when memory was released. Throws {@link LibraryLoadError} when libc cannot be
 * loaded and a `Deno.dlopen` error when the libc has no `malloc_trim` (not glibc).
 */
export function releaseFreeMemory(): boolean {
  return libc().malloc_trim(0) === 1;
}

/** madvise(2) advice: drop the pages; a file mapping's are read back from the page cache when next used. */
const MADV_DONTNEED = 4;

/**
 * Drops this process's resident pages of its own executable's read-only and executable mappings
 * (/proc/self/smaps entries of the /proc/self/exe file, `r--p` and `r-xp`) with madvise(MADV_DONTNEED). They
 * are clean file pages: the kernel reads them back from the page cache on the next touch, so what start-up
 * touched once (the Deno binary's code and data for compiling and loading) stops counting in RSS, and what
 * runs again comes back. A mapping with any anonymous page is left alone: the RELRO segment (`r--p` after the
 * loader's relocations) holds written copies that the file does not have — dropping them crashed Deno at
 * once. (What it saves: docs/performance.md, "malloc_trim and the binary's pages".) Returns the bytes of the
 * mappings advised.
 * Throws {@link LibraryLoadError} when libc cannot be loaded, and a Deno error when /proc cannot be read.
 */
export function unmapBinaryPages(): number {
  const exe = Deno.readLinkSync("/proc/self/exe");
  const smaps = Deno.readTextFileSync("/proc/self/smaps");
  const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) [0-9a-f]+ \S+ \d+ *(.*)$/gm;
  const found: { start: bigint; len: number; from: number }[] = [];
  let m: RegExpExecArray | null;
  while ((m = head.exec(smaps))) {
    if (m[4] !== exe || (m[3] !== "r--p" && m[3] !== "r-xp")) continue;
    const start = BigInt(`0x${m[1]}`);
    found.push({ start, len: Number(BigInt(`0x${m[2]}`) - start), from: head.lastIndex });
  }
  let bytes = 0;
  for (const f of found) {
    // This mapping's fields: up to the next mapping's header line.
    head.lastIndex = f.from;
    const next = head.exec(smaps)?.index ?? smaps.length;
    const anon = /^Anonymous:\s+(\d+)/m.exec(smaps.slice(f.from, next));
    if (!anon || anon[1] !== "0") continue;
    if (libc().madvise(Deno.UnsafePointer.create(f.start), f.len, MADV_DONTNEED) === 0) bytes += f.len;
  }
  return bytes;
}
