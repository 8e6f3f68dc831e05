/**
 * The commit-msg hook's check (`.githooks/commit-msg` runs it; `deno task hooks` points git at that folder):
 *
 * - the subject is `<area>: <what the commit does>`, at most {@link MAX_SUBJECT} characters;
 * - the area is a folder of the code map in docs/architecture.md (`store`, `etcd` or `store/etcd` for
 *   `lib/store/etcd/`), one of {@link FIXED_AREAS}, or a page of docs/ (`docs/performance`); up to
 *   {@link MAX_AREAS} areas joined by ", " for one change that spans them (`bench, tests: …`);
 * - one change per commit: no ";" joining changes in the subject;
 * - the subject says what the commit does, not what was done: no "added"/"adds"/"adding" first word;
 * - a blank line between the subject and the body.
 *
 * Comment lines (`#`) and everything below git's scissors line are not part of the message (git strips
 * them after the hook). Git's own subjects (`Merge …`, `Revert "…"`, `fixup! …`, `squash! …`, `amend! …`)
 * pass as they are. docs/development.md, "Commit messages", is the user's side of this.
 *
 *   deno run --no-config --allow-read tools/commit_msg.ts MESSAGE_FILE
 * @module
 */
import { MAP_FILE, mapFolders } from "./check_codemap.ts";
import { ROOT } from "./ts_files.ts";

/** The longest subject line, in characters. */
export const MAX_SUBJECT = 72;
/** The most areas one subject may name. */
export const MAX_AREAS = 3;
/**
 * Areas outside lib/'s folders: the code map's "Outside lib/" paragraph (cli, tests, bench, tools, deploy,
 * install.sh, .ci), the docs and the README, and `lib` for a change across the library's folders.
 */
export const FIXED_AREAS: readonly string[] = [
  "cli",
  "tests",
  "bench",
  "tools",
  "deploy",
  "install",
  "ci",
  "docs",
  "README",
  "lib",
];

/** Verb forms that report instead of saying what the commit does ("fixed", "adds", "moving"). */
const NOT_IMPERATIVE = new RegExp(
  "^(?:" +
    [
      "add",
      "fix",
      "updat",
      "remov",
      "chang",
      "mov",
      "renam",
      "improv",
      "refactor",
      "clean",
      "implement",
      "creat",
    ]
      .map((v) => `${v}(?:e?d|e?s|e?ing)`).join("|") +
    "|made|makes|making)$",
  "i",
);

/**
 * The areas a subject may name: every code-map folder below lib/ as its path (`store/etcd`) and its last
 * part (`etcd`), {@link FIXED_AREAS}, and `docs/<page>` for each page (file name without `.md`) given.
 */
export function allowedAreas(mapMarkdown: string, docPages: readonly string[]): Set<string> {
  const out = new Set(FIXED_AREAS);
  for (const folder of mapFolders(mapMarkdown)) {
    const rel = folder.replace(/^lib\//, "");
    out.add(rel);
    out.add(rel.slice(rel.lastIndexOf("/") + 1));
  }
  for (const page of docPages) out.add(`docs/${page}`);
  return out;
}

/** The message as git will record it: comment lines and the scissors part gone, leading blank lines too. */
export function messageText(raw: string): string {
  const lines = raw.replace(/\r\n/g, "\n").split("\n");
  const cut = lines.findIndex((l) => /^# -+ >8 -+$/.test(l));
  const kept = (cut < 0 ? lines : lines.slice(0, cut)).filter((l) => !l.startsWith("#"));
  while (kept.length && kept[0].trim() === "") kept.shift();
  return kept.join("\n").trimEnd();
}

/** What is wrong with commit message `raw` (empty: nothing), given the areas it may name. */
export function commitMsgProblems(raw: string, areas: ReadonlySet<string>): string[] {
  const text = messageText(raw);
  if (text === "") return []; // git refuses an empty message itself
  const [subject, second] = text.split("\n");
  if (/^(?:Merge |Revert "|fixup! |squash! |amend! )/.test(subject)) return [];
  const out: string[] = [];
  const len = [...subject].length;
  if (len > MAX_SUBJECT) out.push(`the subject has ${len} characters; at most ${MAX_SUBJECT}`);
  if (second !== undefined && second.trim() !== "") {
    out.push("no blank line between the subject and the body");
  }
  if (subject.includes(";")) out.push('one change per commit: the subject joins changes with ";"');
  const m = /^([^:]+): (\S.*)$/.exec(subject);
  if (!m) {
    out.push('the subject is not "<area>: <what it does>" (e.g. "store: …" or "bench, tests: …")');
    return out;
  }
  const named = m[1].split(", ");
  if (named.length > MAX_AREAS) {
    out.push(`${named.length} areas; at most ${MAX_AREAS} (one change, or the folder above them)`);
  }
  const unknown = named.filter((a) => !areas.has(a));
  if (unknown.length) {
    out.push(
      `not an area: ${unknown.map((a) => `"${a}"`).join(", ")} (a code-map folder of ${MAP_FILE}, ` +
        `${FIXED_AREAS.join(", ")} or docs/<page>)`,
    );
  }
  const first = m[2].split(/\s/, 1)[0];
  if (NOT_IMPERATIVE.test(first)) {
    out.push(`"${first}": say what the commit does ("add …", "fix …"), not what was done`);
  }
  return out;
}

/** The doc pages of `root`/docs (file names without `.md`). */
function docPages(root: string): string[] {
  return [...Deno.readDirSync(`${root}/docs`)].filter((e) => e.isFile && e.name.endsWith(".md"))
    .map((e) => e.name.slice(0, -3));
}

if (import.meta.main) {
  const file = Deno.args[0];
  if (!file) {
    console.error("usage: commit_msg.ts MESSAGE_FILE");
    Deno.exit(2);
  }
  const areas = allowedAreas(Deno.readTextFileSync(`${ROOT}/${MAP_FILE}`), docPages(ROOT));
  const problems = commitMsgProblems(Deno.readTextFileSync(file), areas);
  for (const p of problems) console.error(`commit-msg: ${p}`);
  if (problems.length) {
    console.error(
      `commit-msg: the rules: docs/development.md, "Commit messages"; the message is in ${file} ` +
        `(git commit -e -F ${file} to edit it)`,
    );
    Deno.exit(1);
  }
}
