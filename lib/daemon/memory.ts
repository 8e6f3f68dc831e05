/**
 * Gives memory back after bursts of work: {@link MemoryRelease} runs a full JS garbage collection (when V8
 * runs with --expose-gc: the launcher passes it) and then glibc's malloc_trim (lib/netlink) a moment after
 * the last of a burst of store events or full passes. The memory a burst freed is otherwise kept as resident
 * pages for the daemon's life. Measured with the bundled daemon on etcd (bench/daemon_bench.ts): RSS at
 * 1,000 peers 62.0 → 54.3 MiB with the trim; a GC before it, 68.5 → 62.7 MiB at 5,000 peers. The GC is
 * V8's "last-resort" flavor ({@link fullGarbageCollection}) and runs before every release (it used to run
 * only at start and after ≥ 500 events or a pass over ≥ 1,000 peers): steady RSS as installed, etcd, medians
 * of 3 interleaved runs against the plain GC at those points, 100 peers 51.7 → 48.3 MiB (private 16.6 →
 * 13.5), 5,000 peers 62.7 → 55.0, after a restart with 5,000 66.8 → 55.5. A release follows every full pass
 * (--resync-interval, 10 s): at 5,000 peers a release (GC and trim) took 20-65 ms, the pass itself 120-300 ms.
 *
 * Peaks (VmHWM; a pod's memory limit counts these): start-up releases at once ({@link MemoryRelease.now})
 * before the acquire lists every lease, before the peers' list and before the first full pass, so each
 * grows from a settled heap (most of start-up's transient memory is C heap — compiling the bundle — not JS
 * heap: 62 → 49 MiB at 0 peers with a JS heap of 8 MiB); a long burst of events is released every ~2 s
 * ({@link TRIM_MAX_WAIT_MS}) and a release still pending runs before a full pass. With the reconciler's
 * leaner pass (lib/reconcile/reconciler.ts), as installed, etcd, medians of 3 interleaved runs: adding
 * 4,000 peers to 1,000 peaked at 66.1 → 60.6 MiB, a restart with 5,000 leases at 69.8 → 60.4; steady RSS,
 * programming times and the full pass (101 → 82 ms) not worse. Start-up's releases also drop the Deno
 * binary's resident read-only pages (lib/netlink unmapBinaryPages; numbers there): 100 peers steady 48.9 →
 * 37.5 MiB, peak 52.8 → 38.9; kube mode, 5,000 realistic Nodes (bench/kube_rss_bench.ts) 57.6 → 42.6, peak
 * 68.4 → 57.5; with the release at the very start of runDaemon (lib/daemon/run.ts) that peak is 49.6 (57.3
 * without, same run).
 * @module
 */
import type { Logger } from "../base/log.ts";
import { errText } from "../base/errors.ts";

/** How long after the last burst of work memory is given back. */
export const TRIM_DELAY_MS = 1000;
/**
 * A release asked for is not put off longer than this by further work: a long burst (4,000 leases written
 * while the daemon runs take ~5 s of events) is released every ~2 s instead of once after it (it was 5 s).
 */
export const TRIM_MAX_WAIT_MS = 1000;

/** What a {@link MemoryRelease} calls. */
export interface MemoryHooks {
  /** Gives free C heap memory back to the kernel (run.ts: glibc malloc_trim through lib/netlink). */
  releaseMemory?: () => void;
  /** A full JS garbage collection (run.ts: {@link fullGarbageCollection}, present with --expose-gc). */
  collectGarbage?: () => void;
  /**
   * Drops the resident pages of the Deno binary's read-only mappings (run.ts: lib/netlink's
   * unmapBinaryPages); start-up's releases ({@link MemoryRelease.now}) only.
   */
  releaseBinaryPages?: () => void;
}

/**
 * The `collectGarbage` hook: V8's `gc()` (present with --expose-gc; else undefined) asked for a synchronous
 * major GC of the "last-resort" flavor (V8's CollectAllAvailableGarbage: full GCs that compact the old
 * generation and give its emptied and pooled pages back), not the plain `gc()`. After a burst the live data
 * is small but spread over the pages the burst grew the heap to; a plain full GC keeps those pages. Measured
 * with bench/kube_rss_bench.ts (5000 realistic Nodes, the launcher's V8 flags): JS heap reserved 33 → 13
 * MiB, RSS 91.6 → 66.4 MiB; in a synthetic 12 MiB heap (--jitless) ~10 ms against ~5 ms for a plain one.
 */
export function fullGarbageCollection(
  global: { gc?: (options?: unknown) => unknown } = globalThis as { gc?: (options?: unknown) => unknown },
): (() => void) | undefined {
  const gc = global.gc;
  if (typeof gc !== "function") return undefined;
  return () => void gc({ type: "major", execution: "sync", flavor: "last-resort" });
}

/** Schedules releases after bursts (debounced; never after {@link stop}). */
export class MemoryRelease {
  readonly #hooks: MemoryHooks;
  readonly #log: Logger;
  #timer: ReturnType<typeof setTimeout> | null = null;
  /** When the pending release was first asked for (performance.now()). */
  #first = 0;
  #stopped = false;

  constructor(hooks: MemoryHooks, log: Logger) {
    this.#hooks = hooks;
    this.#log = log;
  }

  /** After a burst of work (a full pass, a batch of store events): a release once the daemon is idle. */
  afterBurst(): void {
    if (!this.#hooks.releaseMemory || this.#stopped) return;
    // Debounced (never in the middle of a burst of events), but not put off for more than TRIM_MAX_WAIT_MS.
    const now = performance.now();
    if (this.#timer !== null) {
      if (now - this.#first >= TRIM_MAX_WAIT_MS) return;
      clearTimeout(this.#timer);
    } else this.#first = now;
    const t = setTimeout(() => this.#release(), TRIM_DELAY_MS);
    Deno.unrefTimer(t as unknown as number);
    this.#timer = t;
  }

  /**
   * Releases at once (synchronously; a pending release is folded into it): before start-up lists every
   * lease, so the list and the first full pass grow from the settled heap, not on top of start-up's
   * transient memory (module compilation, the acquire's list). Start-up's only: it also drops the Deno
   * binary's resident read-only pages (`releaseBinaryPages`), most of them touched by start-up alone.
   */
  now(): void {
    if (!this.#hooks.releaseMemory || this.#stopped) return;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#release(true);
  }

  /**
   * Runs a pending release now (none pending: nothing): before a full pass in the middle of a burst, so the
   * pass's own transient heap comes on top of the settled one, not on top of the burst's garbage as well.
   */
  releasePending(): void {
    if (this.#timer === null) return;
    clearTimeout(this.#timer);
    this.#release(false);
  }

  /** No release after this (a pending one is cancelled). */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #release(binary = false): void {
    this.#timer = null;
    if (this.#stopped) return;
    const t0 = performance.now();
    const gc = this.#hooks.collectGarbage;
    try {
      // The GC first: what it frees outside the JS heap (buffers' backing stores) is then trimmed too.
      gc?.();
      this.#hooks.releaseMemory!();
      if (binary) this.#hooks.releaseBinaryPages?.();
    } catch (e) {
      this.#log.debug("releasing free memory failed", { error: errText(e) });
    }
    this.#log.debug("released free memory", { gc: !!gc, ms: Math.round(performance.now() - t0) });
  }
}
