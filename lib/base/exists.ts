/**
 * Whether a path exists, and whether it is a directory.
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

/** True when `path` is a directory (a link to one included); false on any error. */
export function isDirectory(path: string): boolean {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
}
