/**
 * The code-map gate of `deno task gate` (`deno task codemap`): fails (exit 1) when a folder of lib/ has no
 * entry in the code map of docs/architecture.md (a list item under `## Code map` that starts with the
 * folder, e.g. `` - `lib/store/etcd/`: … ``), when the map names a folder that no longer exists, when a
 * line of the section is longer than {@link MAX_LINE} characters (a map a reader can scan), or when a
 * `path:line` link of the page no longer points at what it names ({@link lineRefProblems}). A new folder is
 * documented in the same commit that makes it: what it owns and who may import it.
 *
 * Lines moved by a change: `deno run --allow-read --allow-write tools/check_codemap.ts --fix` moves every
 * link whose name is now on one nearest line to that line (see {@link fixLineRefs}); the rest it prints.
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
  for (const line of mapLines(markdown).lines) {
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

/**
 * One `path:line` link of the page and the name it promises there:
 * `` [`lib/x.ts:12`](../lib/x.ts#L12) `Class.method()` `` (the text is the target's path from the project
 * root; the name in backticks right after the link, on the same line or the next).
 */
export interface LineRef {
  /** The page's line of the link (1-based). */
  docLine: number;
  /** The file, relative to the project root. */
  path: string;
  /** The line the link points at (1-based). */
  line: number;
  /** The name as written after the link (`Reconciler.#program()`). */
  name: string;
  /** What line `line` must contain: the name's last segment without `()` (`#program`). */
  ident: string;
  /** Where the link starts and ends in the page (for {@link fixLineRefs}). */
  start: number;
  end: number;
}

/** A link to a line: `[text](target#Ln)`. */
const LINE_LINK = /\[([^\]\n]*)\]\(([^)\s#]+)#L(\d+)\)/g;
/** The name right after a line link: `Name`, `Class.method()`, `Class.#private()`, `a.b.c`. */
const NAME_AFTER = /^[ \t]*\n?[ \t]*`([^`\n]+)`/;
const IDENT = /^#?[A-Za-z_$][\w$]*$/;

/** The identifier `name` promises: its last `.` segment, without a trailing `()`; null when it is none. */
export function identOf(name: string): string | null {
  const last = name.replace(/\(\)$/, "").split(".").pop()!;
  return IDENT.test(last) ? last : null;
}

/** `target` of a link in docs/ (`../lib/x.ts`) as a path from the project root, or null outside it. */
function rootPath(target: string): string | null {
  const parts = MAP_FILE.split("/").slice(0, -1);
  for (const seg of target.split("/")) {
    if (seg === "..") {
      if (!parts.length) return null;
      parts.pop();
    } else if (seg !== ".") parts.push(seg);
  }
  return parts.join("/");
}

/** The page's line links, and what is wrong with the form of those that are not well formed. */
export function lineRefs(markdown: string): { refs: LineRef[]; problems: string[] } {
  const refs: LineRef[] = [], problems: string[] = [];
  const lineAt = (i: number) => markdown.slice(0, i).split("\n").length;
  for (const m of markdown.matchAll(LINE_LINK)) {
    const [whole, text, target, n] = m;
    if (/^[a-z][\w+.-]*:/i.test(target)) continue; // another site's line (a URL): not ours to check
    const docLine = lineAt(m.index);
    const at = `${MAP_FILE}:${docLine}`;
    const path = rootPath(target);
    const line = Number(n);
    if (path === null || text !== `\`${path}:${line}\``) {
      problems.push(`${at}: link text ${text} should be \`${path ?? target}:${line}\` (its target)`);
      continue;
    }
    const after = NAME_AFTER.exec(markdown.slice(m.index + whole.length));
    const ident = after ? identOf(after[1]) : null;
    if (!after || !ident) {
      problems.push(
        `${at}: ${path}:${line} needs the name it points at in backticks right after the link ` +
          "(`fn()`, `Class.method()`, `CONST`)",
      );
      continue;
    }
    refs.push({ docLine, path, line, name: after[1], ident, start: m.index, end: m.index + whole.length });
  }
  return { refs, problems };
}

/** Whether `text` holds `ident` as a whole name (`peer` is not in `#peer`, `peers` or `$peer`). */
export function holds(text: string, ident: string): boolean {
  const esc = ident.replace(/[$]/g, "\\$");
  return new RegExp(`(?<![\\w$#])${esc}(?![\\w$])`).test(text);
}

/** The lines of `lines` (1-based) nearest to `line` that hold `ident`: one, two at equal distance, or none. */
export function nearest(lines: readonly string[], ident: string, line: number): number[] {
  let best: number[] = [], dist = Infinity;
  lines.forEach((l, i) => {
    if (!holds(l, ident)) return;
    const d = Math.abs(i + 1 - line);
    if (d < dist) (best = [i + 1]), (dist = d);
    else if (d === dist) best.push(i + 1);
  });
  return best;
}

/** A file's lines, or null when it cannot be read. */
export type ReadLines = (path: string) => readonly string[] | null;

/** The problem of one well-formed link, or null when its line holds its name. */
function refProblem(r: LineRef, read: ReadLines): string | null {
  const at = `${MAP_FILE}:${r.docLine}: ${r.path}:${r.line}`;
  const lines = read(r.path);
  if (!lines) return `${at}: no such file (the link names \`${r.name}\`)`;
  if (r.line >= 1 && r.line <= lines.length && holds(lines[r.line - 1], r.ident)) return null;
  const near = nearest(lines, r.ident, r.line);
  const where = near.length === 0
    ? `it is nowhere in ${r.path}`
    : near.length === 1
    ? `nearest: line ${near[0]}: ${lines[near[0] - 1].trim().slice(0, 60)}`
    : `nearest: lines ${near.join(" and ")}`;
  return `${at} should hold \`${r.ident}\` (the link names \`${r.name}\`); ${where}`;
}

/**
 * What is wrong with the page's `path:line` links: a link whose text is not its target's `path:line`, one
 * with no name in backticks after it, a file that is gone, a line that does not hold the name (with the
 * nearest line that does, to fix it by).
 */
export function lineRefProblems(markdown: string, read: ReadLines): string[] {
  const { refs, problems } = lineRefs(markdown);
  for (const r of refs) {
    const p = refProblem(r, read);
    if (p) problems.push(p);
  }
  return problems;
}

/**
 * The page with every link whose line no longer holds its name moved to the one nearest line that does
 * (text and target both); a link with no such line, or two at equal distance, stays for a person to fix.
 */
export function fixLineRefs(markdown: string, read: ReadLines): string {
  let out = "", from = 0;
  for (const r of lineRefs(markdown).refs) {
    const lines = read(r.path);
    if (!lines || holds(lines[r.line - 1] ?? "", r.ident)) continue;
    const near = nearest(lines, r.ident, r.line);
    if (near.length !== 1) continue;
    const link = markdown.slice(r.start, r.end)
      .replace(`\`${r.path}:${r.line}\``, `\`${r.path}:${near[0]}\``)
      .replace(new RegExp(`#L${r.line}\\)$`), `#L${near[0]})`);
    out += markdown.slice(from, r.start) + link;
    from = r.end;
  }
  return out + markdown.slice(from);
}

/** Reads a file of the project as lines (null when it is missing or not a file). */
function projectLines(root: string): ReadLines {
  const cache = new Map<string, readonly string[] | null>();
  return (path) => {
    if (!cache.has(path)) {
      try {
        cache.set(path, Deno.readTextFileSync(`${root}/${path}`).split("\n"));
      } catch {
        cache.set(path, null);
      }
    }
    return cache.get(path)!;
  };
}

if (import.meta.main) {
  const folders = libFolders(ROOT);
  const doc = `${ROOT}/${MAP_FILE}`;
  if (Deno.args.includes("--fix")) {
    const before = Deno.readTextFileSync(doc);
    const after = fixLineRefs(before, projectLines(ROOT));
    if (after !== before) Deno.writeTextFileSync(doc, after);
    console.log(`codemap: ${after === before ? "no link moved" : `links moved in ${MAP_FILE}`}`);
  }
  const markdown = Deno.readTextFileSync(doc);
  const map = codemapProblems(folders, markdown);
  const links = lineRefProblems(markdown, projectLines(ROOT));
  for (const p of [...map, ...links]) console.error(`codemap: ${p}`);
  if (map.length) {
    console.error(
      `codemap: ${map.length} code-map problem(s): one entry per folder (- \`lib/x/\`: what it owns, then ` +
        `who may use it), lines of at most ${MAX_LINE} characters`,
    );
  }
  if (links.length) {
    console.error(
      `codemap: ${links.length} stale path:line link(s); moving those with one nearest line: ` +
        "deno run --allow-read --allow-write tools/check_codemap.ts --fix",
    );
  }
  if (map.length || links.length) Deno.exit(1);
  console.log(
    `codemap: every lib folder mapped (${folders.length}), every path:line link holds its name ` +
      `(${lineRefs(markdown).refs.length})`,
  );
}
