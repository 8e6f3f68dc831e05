import { assertEquals } from "../tests/assert.ts";
import { codemapProblems, libFolders, longLines, MAP_FILE, mapFolders, MAX_LINE } from "./check_codemap.ts";
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
