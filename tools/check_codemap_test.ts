import { assertEquals } from "../tests/assert.ts";
import {
  codemapProblems,
  fixLineRefs,
  holds,
  identOf,
  libFolders,
  lineRefProblems,
  lineRefs,
  longLines,
  MAP_FILE,
  mapFolders,
  MAX_LINE,
  nearest,
  type ReadLines,
} from "./check_codemap.ts";
import { ROOT } from "./ts_files.ts";

const doc = [
  "# Architecture",
  "- `lib/mentioned/`: not in the map: before the section",
  "## Code map",
  "- `lib/base/`: basics",
  "  - used by: everyone",
  "- `lib/store/etcd/`: etcd, and `lib/cni/` named inside an entry",
  "  - used by: store",
  "- `lib/gone`: removed",
  "text with `lib/daemon/` in it is not an entry",
  "  - `lib/nested/`: a sub-item is not an entry",
  "## Flows",
  "- `lib/after/`: not in the map: after the section",
].join("\n");

Deno.test("codemap: the entries of the Code map section name folders, nothing else", () => {
  assertEquals(mapFolders(doc), ["lib/base", "lib/store/etcd", "lib/gone"]);
  assertEquals(mapFolders("# no map here"), []);
});

Deno.test("codemap: a folder missing from the map and a mapped folder that is gone are both problems", () => {
  assertEquals(codemapProblems(["lib/base", "lib/daemon", "lib/store/etcd"], doc), [
    `lib/daemon/ has no line in the code map of ${MAP_FILE}`,
    `lib/gone/ is in the code map of ${MAP_FILE} but does not exist`,
  ]);
  assertEquals(codemapProblems(["lib/base", "lib/gone", "lib/store/etcd"], doc), []);
});

Deno.test("codemap: this checkout's map covers every lib folder", () => {
  const folders = libFolders(ROOT);
  assertEquals(folders.includes("lib/backend/udp"), true);
  assertEquals(codemapProblems(folders, Deno.readTextFileSync(`${ROOT}/${MAP_FILE}`)), []);
});

Deno.test("codemap: a line of the section over MAX_LINE characters is a problem, with its line number", () => {
  const entry = (n: number) => "- `lib/base/`: " + "x".repeat(n - 15);
  assertEquals(entry(MAX_LINE).length, MAX_LINE);
  const md = [
    "# Architecture",
    "a long line before the map: " + "y".repeat(200),
    "## Code map",
    entry(MAX_LINE),
    "  - used by: " + "é".repeat(MAX_LINE - 13), // characters, not bytes
    entry(MAX_LINE + 1),
    "## Flows",
    "a long line after the map: " + "y".repeat(200),
  ].join("\n");
  assertEquals(longLines(md), [
    `${MAP_FILE}:6: a code-map line of ${MAX_LINE + 1} characters; at most ${MAX_LINE} ` +
    "(wrap it, or move the explanation to the folder's docs/ page)",
  ]);
  assertEquals(codemapProblems(["lib/base"], md), longLines(md));
  assertEquals(longLines("# no map here\n" + "z".repeat(300)), []);
});

/** A project of two files for the line-link checks. */
const files: Record<string, string[]> = {
  "lib/a.ts": [
    "export class Rec {", //                                 1
    "  setPeer(k: string): void {", //                      2
    "    this.#program(k);", //                             3
    "  }", //                                               4
    "  #program(k: string): void {}", //                    5
    "}", //                                                 6
    "export function peers(): void {}", //                  7
    "export const $peer = 1; // #peer, peers", //           8
    "export function peer(): void {}", //                   9
  ],
  "main.ts": ["const name = 1;", "if (import.meta.main) {}"],
};
const read: ReadLines = (p) => files[p] ?? null;
const link = (path: string, n: number, name: string) => `[\`${path}:${n}\`](../${path}#L${n}) \`${name}\``;

Deno.test("codemap: a line link's name is the last segment of what follows it in backticks", () => {
  assertEquals(identOf("Reconciler.#program()"), "#program");
  assertEquals(identOf("import.meta.main"), "main");
  assertEquals(identOf("ADD_STEPS"), "ADD_STEPS");
  assertEquals(identOf("plugin.add()"), "add");
  assertEquals(identOf("two words"), null);
  assertEquals(identOf("f(x)"), null);
});

Deno.test("codemap: a line holds a name only as a whole name", () => {
  assertEquals(holds("export function peer(): void {}", "peer"), true);
  assertEquals(holds("export function peers(): void {}", "peer"), false);
  assertEquals(holds("  #peer = 1; $peer; peer_x", "peer"), false);
  assertEquals(holds("    this.#program(k);", "#program"), true);
  assertEquals(holds("    this.#program(k);", "program"), false);
  assertEquals(holds("export const $peer = 1;", "$peer"), true);
});

Deno.test("codemap: line links are read with their page line, file, line and name", () => {
  const md = [
    "# Architecture",
    `- ${link("lib/a.ts", 2, "Rec.setPeer()")} → ${link("lib/a.ts", 5, "Rec.#program()")}`,
    `- ${link("main.ts", 2, "import.meta.main")} and a link [elsewhere](udp.md#offloads)`,
    "- flannel's: [vxlan.go](https://github.com/flannel-io/flannel/blob/v0.26.0/pkg/backend/vxlan/vxlan.go#L98)",
    `- wrapped: [\`lib/a.ts:9\`](../lib/a.ts#L9)`,
    "  `peer()` on the next line",
  ].join("\n");
  const { refs, problems } = lineRefs(md);
  assertEquals(problems, []);
  assertEquals(refs.map((r) => [r.docLine, r.path, r.line, r.name, r.ident]), [
    [2, "lib/a.ts", 2, "Rec.setPeer()", "setPeer"],
    [2, "lib/a.ts", 5, "Rec.#program()", "#program"],
    [3, "main.ts", 2, "import.meta.main", "main"],
    [5, "lib/a.ts", 9, "peer()", "peer"],
  ]);
  assertEquals(lineRefProblems(md, read), []);
});

Deno.test("codemap: a line link whose text is not its target, or with no name after it, is a problem", () => {
  const md = [
    "# Architecture",
    "- [`lib/a.ts:3`](../lib/a.ts#L2) `Rec.setPeer()`",
    "- [a.ts](../lib/a.ts#L2) `Rec.setPeer()`",
    "- [`lib/a.ts:2`](../lib/a.ts#L2) and no name",
    "- [`lib/a.ts:2`](../lib/a.ts#L2) `not a name()`",
  ].join("\n");
  assertEquals(lineRefProblems(md, read), [
    `${MAP_FILE}:2: link text \`lib/a.ts:3\` should be \`lib/a.ts:2\` (its target)`,
    `${MAP_FILE}:3: link text a.ts should be \`lib/a.ts:2\` (its target)`,
    `${MAP_FILE}:4: lib/a.ts:2 needs the name it points at in backticks right after the link ` +
    "(`fn()`, `Class.method()`, `CONST`)",
    `${MAP_FILE}:5: lib/a.ts:2 needs the name it points at in backticks right after the link ` +
    "(`fn()`, `Class.method()`, `CONST`)",
  ]);
});

Deno.test("codemap: a line that no longer holds the name is a problem naming the nearest line that does", () => {
  const md = [
    "# Architecture",
    `- ${link("lib/a.ts", 4, "Rec.#program()")}`, // moved down one: 3 and 5 hold it, 3 and 5 are as near
    `- ${link("lib/a.ts", 6, "Rec.#program()")}`, // 5 is nearest
    `- ${link("lib/a.ts", 8, "peer()")}`, // `$peer`, `#peer`, `peers` are not it: 9 is
    `- ${link("lib/a.ts", 40, "gone()")}`,
    `- ${link("lib/b.ts", 1, "b()")}`,
  ].join("\n");
  assertEquals(lineRefProblems(md, read), [
    `${MAP_FILE}:2: lib/a.ts:4 should hold \`#program\` (the link names \`Rec.#program()\`); ` +
    "nearest: lines 3 and 5",
    `${MAP_FILE}:3: lib/a.ts:6 should hold \`#program\` (the link names \`Rec.#program()\`); ` +
    "nearest: line 5: #program(k: string): void {}",
    `${MAP_FILE}:4: lib/a.ts:8 should hold \`peer\` (the link names \`peer()\`); ` +
    "nearest: line 9: export function peer(): void {}",
    `${MAP_FILE}:5: lib/a.ts:40 should hold \`gone\` (the link names \`gone()\`); it is nowhere in lib/a.ts`,
    `${MAP_FILE}:6: lib/b.ts:1: no such file (the link names \`b()\`)`,
  ]);
  assertEquals(nearest(files["lib/a.ts"], "#program", 4), [3, 5]);
  assertEquals(nearest(files["lib/a.ts"], "peer", 1), [9]);
  assertEquals(nearest(files["lib/a.ts"], "gone", 1), []);
});

Deno.test("codemap: --fix moves a link to its one nearest line, text and target, and leaves the rest", () => {
  const md = [
    "# Architecture",
    `- ${link("lib/a.ts", 2, "Rec.setPeer()")} stays`,
    `- ${link("lib/a.ts", 6, "Rec.#program()")} moves to 5`,
    `- ${link("lib/a.ts", 4, "Rec.#program()")} stays: 3 and 5 are as near`,
    `- ${link("lib/a.ts", 12, "peer()")} moves to 9, past the end`,
    `- ${link("lib/b.ts", 1, "b()")} stays: no file`,
  ].join("\n");
  const fixed = fixLineRefs(md, read);
  assertEquals(fixed.split("\n"), [
    "# Architecture",
    `- ${link("lib/a.ts", 2, "Rec.setPeer()")} stays`,
    `- ${link("lib/a.ts", 5, "Rec.#program()")} moves to 5`,
    `- ${link("lib/a.ts", 4, "Rec.#program()")} stays: 3 and 5 are as near`,
    `- ${link("lib/a.ts", 9, "peer()")} moves to 9, past the end`,
    `- ${link("lib/b.ts", 1, "b()")} stays: no file`,
  ]);
  assertEquals(lineRefProblems(fixed, read).length, 2);
  assertEquals(fixLineRefs(fixed, read), fixed);
});

Deno.test("codemap: every path:line link of this checkout's page holds its name", () => {
  const md = Deno.readTextFileSync(`${ROOT}/${MAP_FILE}`);
  const readProject: ReadLines = (p) => {
    try {
      return Deno.readTextFileSync(`${ROOT}/${p}`).split("\n");
    } catch {
      return null;
    }
  };
  assertEquals(lineRefs(md).refs.length > 50, true);
  assertEquals(lineRefProblems(md, readProject), []);
});
