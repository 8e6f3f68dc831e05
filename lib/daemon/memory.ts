/**
 * Gives memory back after bursts of work: {@link MemoryRelease} runs a full JS garbage collection (when V8
 * runs with --expose-gc: the launcher passes it) and then glibc's malloc_trim (lib/sys/malloc.ts) a moment after
 * the last of a burst of store events or full passes. The memory a burst freed is otherwise kept as resident
 * pages for the daemon's life. The GC is V8's "last-resort" flavor ({@link fullGarbageCollection}) and runs
 * before every release; a release follows every full pass (--resync-interval). What each step saves and
 * costs: docs/performance.md, "Daemon memory: releases after bursts".
 *
 * Peaks (VmHWM; a pod's memory limit counts these): start-up releases at once ({@link MemoryRelease.now})
 * before the acquire lists every lease, before the peers' list and before the first full pass, so each
 * grows from a settled heap (most of start-up's transient memory is C heap — compiling the bundle — not JS
 * heap); a long burst of events is released every ~2 s ({@link TRIM_MAX_WAIT_MS}) and a release still
 * pending runs before a full pass. Start-up's releases, and every release made once the daemon is idle
 * again, also drop the Deno binary's resident read-only pages (lib/sys/malloc.ts unmapBinaryPages): what a
 * burst or a pass paged in of the binary's code stops counting until it runs again (docs/performance.md,
 * "Daemon memory: the binary's pages when idle"). Peaks measured: docs/performance.md, "Daemon memory:
 * peaks". Kube mode's lists (at start, and the re-list after 410 Gone) are released by the store itself,
 * through a hook run.ts hands to openStore, not through this class (the store sits below the daemon).
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
  /** Gives free C heap memory back to the kernel (run.ts: glibc malloc_trim through lib/sys/malloc.ts). */
  releaseMemory?: () => void;
  /** A full JS garbage collection (run.ts: {@link fullGarbageCollection}, present with --expose-gc). */
  collectGarbage?: () => void;
  /**
   * Drops the resident pages of the Deno binary's read-only mappings (run.ts: lib/sys/malloc.ts's
   * unmapBinaryPages): at start-up's releases ({@link MemoryRelease.now}) and at releases made when the
   * daemon is idle (none in the last {@link TRIM_DELAY_MS}); not in the middle of a burst or before a pass,
   * which would page the same code back in at once.
   */
  releaseBinaryPages?: () => void;
}

/**
 * The `collectGarbage` hook: V8's `gc()` (present with --expose-gc; else undefined) asked for a synchronous
 * major GC of the "last-resort" flavor (V8's CollectAllAvailableGarbage: full GCs that compact the old
 * generation and give its emptied and pooled pages back), not the plain `gc()`. After a burst the live data
 * is small but spread over the pages the burst grew the heap to; a plain full GC keeps those pages (the
 * difference measured: docs/performance.md, "Daemon memory: the last-resort GC").
 */
export function fullGarbageCollection(
  global: { gc?: (options?: unknown) => unknown } = globalThis as { gc?: (options?: unknown) => unknown },
): (() => void) | undefined {
  const gc = global.gc;
  if (typeof gc !== "function") return undefined;
  return () => void gc({ type: "major", execution: "sync", flavor: "last-resort" });
}

/** How much earlier than TRIM_DELAY_MS a timer's callback may find itself (clock and timer rounding). */
const TIMER_SLACK_MS = 50;

/** Schedules releases after bursts (debounced; never after {@link stop}). */
export class MemoryRelease {
  readonly #hooks: MemoryHooks;
  readonly #log: Logger;
  #timer: ReturnType<typeof setTimeout> | null = null;
  /** When the pending release was first asked for (performance.now()). */
  #first = 0;
  /** When work last asked for a release (performance.now()). */
  #last = 0;
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
    this.#last = now;
    if (this.#timer !== null) {
      if (now - this.#first >= TRIM_MAX_WAIT_MS) return;
      clearTimeout(this.#timer);
    } else this.#first = now;
    this.#arm(TRIM_DELAY_MS);
  }

  #arm(ms: number): void {
    const t = setTimeout(() => this.#fire(), ms);
    Deno.unrefTimer(t as unknown as number);
    this.#timer = t;
  }

  /**
   * The scheduled release. Idle (no work asked for one in the last TRIM_DELAY_MS): with the binary's pages.
   * Forced in a burst still going on: without them, and another release is scheduled for when it is quiet.
   */
  #fire(): void {
    const quiet = performance.now() - this.#last;
    const idle = quiet >= TRIM_DELAY_MS - TIMER_SLACK_MS;
    this.#release(idle);
    if (idle || this.#stopped) return;
    this.#first = performance.now();
    this.#arm(TRIM_DELAY_MS - quiet);
  }

  /**
   * Releases at once (synchronously; a pending release is folded into it): before start-up lists every
   * lease, so the list and the first full pass grow from the settled heap, not on top of start-up's
   * transient memory (module compilation, the acquire's list). It also drops the Deno binary's resident
   * read-only pages (`releaseBinaryPages`), most of them touched by start-up alone.
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
