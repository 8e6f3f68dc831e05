/**
 * Test helpers for secrets in memory: which Uint8Arrays a call made (their ArrayBuffers, through a
 * Uint8Array subclass installed on globalThis for the call), and whether a buffer holds a 32-byte key.
 * @module
 */

/**
 * Runs `f` with every Uint8Array made meanwhile recorded (their ArrayBuffers): the writer's buffers,
 * outgrown ones included. Arrays made before (the caller's keys) are not recorded.
 */
export function recordingArrays(f: () => void): Set<ArrayBuffer> {
  const bufs = new Set<ArrayBuffer>();
  const Orig = globalThis.Uint8Array;
  class Rec extends Orig {
    // deno-lint-ignore no-explicit-any
    constructor(...a: any[]) {
      super(...(a as []));
      bufs.add(this.buffer as ArrayBuffer);
    }
    static override [Symbol.hasInstance](x: unknown): boolean {
      return x instanceof Orig;
    }
  }
  globalThis.Uint8Array = Rec as Uint8ArrayConstructor;
  try {
    f();
  } catch {
    // the caller looks at what it left behind
  } finally {
    globalThis.Uint8Array = Orig;
  }
  return bufs;
}

/** True when `b` holds 32 bytes of `k` in a row. */
export function holds(b: ArrayBuffer, k: number): boolean {
  const v = new Uint8Array(b);
  for (let i = 0, run = 0; i < v.length; i++) {
    run = v[i] === k ? run + 1 : 0;
    if (run === 32) return true;
  }
  return false;
}
