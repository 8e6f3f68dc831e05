/**
 * Whether a path exists.
 * @module
 */

/** True when `path` can be stat'ed (a file, a directory or another kind); false on any error. */
export function pathExists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}
