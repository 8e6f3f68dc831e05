/**
 * Whether this process is short-lived: a CNI plugin call, which runs once and exits within tens of
 * milliseconds, against the daemon and the long-running commands. A leaf (imports nothing), so the lowest
 * layers (lib/sys/ffi.ts, the FFI loader) can ask it: they trade what pays off over a long life (V8 fast
 * calls for FFI symbols, whose trampolines cost time to generate at binding time: lib/sys/ffi.ts) for what
 * is cheapest once. The CNI entry point (cli/cni_main.ts) marks the process before anything is bound;
 * nothing else does, so every other process keeps the default.
 * @module
 */

let shortLived = false;

/** Marks this process as short-lived (the CNI entry point, before it binds anything). */
export function markShortLived(): void {
  shortLived = true;
}

/** Whether {@link markShortLived} was called in this process. */
export function isShortLived(): boolean {
  return shortLived;
}
