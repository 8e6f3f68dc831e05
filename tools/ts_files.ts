/**
 * The project's TypeScript sources for the tools that read them (fn-sizes, the boundary check).
 * @module
 */

/** The TypeScript files below `dirs` (unit tests `*_test.ts` left out), sorted, relative to `root`. */
export function productFiles(root: string, dirs: string[]): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const e of [...Deno.readDirSync(`${root}/${rel}`)].sort((a, b) => a.name.localeCompare(b.name))) {
      const path = `${rel}/${e.name}`;
      if (e.isDirectory) walk(path);
      else if (e.isFile && e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) out.push(path);
    }
  };
  for (const d of dirs) walk(d);
  return out;
}

/** The project root (the directory above tools/). */
export const ROOT: string = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
