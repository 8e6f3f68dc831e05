/**
 * Whether a path exists, whether it is a directory, and whether a program is on PATH.
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

/** True when `tool` is a file in one of PATH's directories (no PATH: /usr/sbin:/usr/bin:/sbin:/bin). */
export function onPath(tool: string): boolean {
  for (const dir of (Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin").split(":")) {
    try {
      if (Deno.statSync(`${dir}/${tool}`).isFile) return true;
    } catch { /* next */ }
  }
  return false;
}
