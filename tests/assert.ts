/**
 * Test assertions on top of `node:assert` (JSR's @std/assert cannot be installed here).
 * Names and argument order follow @std/assert so tests read the same.
 * @module
 */
import nodeAssert from "node:assert/strict";

/** Fails unless `cond` is truthy. */
export function assert(cond: unknown, msg?: string): asserts cond {
  nodeAssert.ok(cond, msg);
}

/** Deep, strict equality. */
export function assertEquals<T>(actual: unknown, expected: T, msg?: string): asserts actual is T {
  nodeAssert.deepStrictEqual(actual, expected, msg);
}

/** Deep, strict inequality. */
export function assertNotEquals(actual: unknown, expected: unknown, msg?: string): void {
  nodeAssert.notDeepStrictEqual(actual, expected, msg);
}

/** `actual` includes `expected` as a substring. */
export function assertStringIncludes(actual: string, expected: string, msg?: string): void {
  if (!String(actual).includes(expected)) {
    throw new nodeAssert.AssertionError({
      message: msg ?? `expected ${JSON.stringify(actual)} to include ${JSON.stringify(expected)}`,
    });
  }
}

/** `actual` matches `re`. */
export function assertMatch(actual: string, re: RegExp, msg?: string): void {
  nodeAssert.match(actual, re, msg);
}

// deno-lint-ignore no-explicit-any
type ErrorClass = new (...args: any[]) => Error;

function checkError(thrown: unknown, cls?: ErrorClass, includes?: string): Error {
  const e = thrown as Error;
  if (!(thrown instanceof Error)) {
    throw new nodeAssert.AssertionError({ message: `thrown value is not an Error: ${e}` });
  }
  if (cls && !(thrown instanceof cls)) {
    throw new nodeAssert.AssertionError({
      message: `expected ${cls.name}, got ${e.constructor.name}: ${e.message}`,
    });
  }
  if (includes && !e.message.includes(includes)) {
    throw new nodeAssert.AssertionError({
      message: `error message ${JSON.stringify(e.message)} lacks ${JSON.stringify(includes)}`,
    });
  }
  return e;
}

/** `fn` throws (an instance of `cls`, with `includes` in its message, when given). Returns the error. */
export function assertThrows(fn: () => unknown, cls?: ErrorClass, includes?: string): Error {
  try {
    fn();
  } catch (e) {
    return checkError(e, cls, includes);
  }
  throw new nodeAssert.AssertionError({ message: "expected function to throw" });
}

/** `fn` rejects (an instance of `cls`, with `includes` in its message, when given). Returns the error. */
export async function assertRejects(
  fn: () => Promise<unknown>,
  cls?: ErrorClass,
  includes?: string,
): Promise<Error> {
  try {
    await fn();
  } catch (e) {
    return checkError(e, cls, includes);
  }
  throw new nodeAssert.AssertionError({ message: "expected promise to reject" });
}
