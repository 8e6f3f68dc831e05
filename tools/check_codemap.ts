/**
 * The code-map gate of `deno task gate` (`deno task codemap`): fails (exit 1) when a folder of lib/ has no
 * entry in the code map of docs/architecture.md (a list item under `## Code map` that starts with the
 * folder, e.g. `` - `lib/store/etcd/`: … ``), when the map names a folder that no longer exists, or when a
 * line of the section is longer than {@link MAX_LINE} characters (a map a reader can scan). A new folder is
 * documented in the same commit that makes it: what it owns and who may import it.
 * @module
 */
import { ROOT } from "./ts_files.ts";

/** The map's document, relative to the project root. */
export const MAP_FILE = "docs/architecture.md";
/** The longest line of the code map section, in characters (deno fmt's line width). */
export const MAX_LINE = 110;

/** The lines of the `## Code map` section after its heading (none without one), and the heading's index. */
function mapLines(markdown: string): { lines: string[]; heading: number } {
  const all = markdown.split("\n");
  const heading = all.findIndex((l) => /^## Code map\s*$/.test(l));
  if (heading < 0) return { lines: [], heading };
  const rest = all.slice(heading + 1);
  const end = rest.findIndex((l) => l.startsWith("## "));
  return { lines: end < 0 ? rest : rest.slice(0, end), heading };
}

function mapSection(markdown: string): string[] {
  return mapLines(markdown).lines;
}

/** The code map's lines longer than {@link MAX_LINE} characters, as problems naming line and length. */
export function longLines(markdown: string): string[] {
  const { lines, heading } = mapLines(markdown);
  const out: string[] = [];
  lines.forEach((line, i) => {
    const n = [...line].length;
    if (n > MAX_LINE) {
      out.push(
        `${MAP_FILE}:${heading + 2 + i}: a code-map line of ${n} characters; at most ${MAX_LINE} ` +
          "(wrap it, or move the explanation to the folder's docs/ page)",
      );
    }
  });
  return out;
}

/** The folders named by the code map's entries (`lib/x/` or `lib/x/y/` starting a list item), in order. */
export function mapFolders(markdown: string): string[] {
  const out: string[] = [];
  for (const line of mapSection(markdown)) {
    const m = /^- `(lib\/[^`]*?)\/?`/.exec(line);
    if (m) out.push(m[1]);
  }
  return out;
}

/**
 * Every directory below lib/ that holds a file at any depth (relative, without a trailing slash), sorted. An
 * empty directory (left behind by a move: git keeps none) is not a folder of the code.
 */
export function libFolders(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): boolean => {
    let files = false;
    for (const e of Deno.readDirSync(`${root}/${rel}`)) {
      if (e.isFile) files = true;
      else if (e.isDirectory && walk(`${rel}/${e.name}`)) {
        out.push(`${rel}/${e.name}`);
        files = true;
      }
    }
    return files;
  };
  walk("lib");
  return out.sort();
}

/** What is wrong with the map: folders it misses, folders it names that do not exist, lines too long. */
export function codemapProblems(folders: readonly string[], markdown: string): string[] {
  const named = mapFolders(markdown);
  const have = new Set(folders);
  const inMap = new Set(named);
  return [
    ...folders.filter((f) => !inMap.has(f)).map((f) => `${f}/ has no line in the code map of ${MAP_FILE}`),
    ...named.filter((f) => !have.has(f)).map((f) =>
      `${f}/ is in the code map of ${MAP_FILE} but does not exist`
    ),
    ...longLines(markdown),
  ];
}

if (import.meta.main) {
  const folders = libFolders(ROOT);
  const problems = codemapProblems(folders, Deno.readTextFileSync(`${ROOT}/${MAP_FILE}`));
  for (const p of problems) console.error(`codemap: ${p}`);
  if (problems.length) {
    console.error(
      `codemap: ${problems.length} problem(s): one entry per folder (- \`lib/x/\`: what it owns, then ` +
        `who may use it), lines of at most ${MAX_LINE} characters`,
    );
    Deno.exit(1);
  }
  console.log(`codemap: every lib folder mapped (${folders.length})`);
}
