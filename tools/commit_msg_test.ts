import { assert, assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { allowedAreas, commitMsgProblems, MAX_SUBJECT, messageText } from "./commit_msg.ts";
import { ROOT } from "./ts_files.ts";

const MAP = [
  "# Architecture",
  "## Code map",
  "- `lib/base/`: basics",
  "- `lib/store/etcd/`: the etcd store",
  "- `lib/doctor/checks/`: check families",
  "## Boundaries",
].join("\n");
const AREAS = allowedAreas(MAP, ["performance", "lab"]);

const ok = (msg: string) => assertEquals(commitMsgProblems(msg, AREAS), [], msg);
const bad = (msg: string, ...want: string[]) => {
  const got = commitMsgProblems(msg, AREAS);
  assertEquals(got.length, want.length, `${msg}: ${got.join(" | ")}`);
  want.forEach((w, i) => assertStringIncludes(got[i], w));
};

Deno.test("commit_msg: areas are the code map's folders (path and last part), the fixed set and doc pages", () => {
  for (const a of ["base", "store/etcd", "etcd", "doctor/checks", "checks", "tests", "README", "docs/lab"]) {
    assert(AREAS.has(a), a);
  }
  for (const a of ["store", "doctor", "lib/base", "docs/performance.md", "memory", "kube store"]) {
    assert(!AREAS.has(a), a);
  }
});

Deno.test("commit_msg: well-formed subjects pass", () => {
  ok("base: one pathExists for the four copies of exists()");
  ok("etcd: back off 0.8-30 s between watch retries\n\nMeasured: x.\n");
  ok("bench, tests: one daemon_probe and spawnEtcd, not per-bench copies");
  ok("docs/performance: the re-list changes measured one at a time");
  ok("README: the front page names the docs");
  ok("tests: " + "x".repeat(MAX_SUBJECT - 7)); // exactly MAX_SUBJECT characters
  ok("docs: " + "é".repeat(MAX_SUBJECT - 6)); // characters, not bytes
  ok("lib: name the main table RT_TABLE_MAIN in every file");
});

Deno.test("commit_msg: comments, the scissors part and git's own subjects", () => {
  const edited = "# Please enter the commit message\n\ntools: add a hook\n\nbody\n# comment; not checked\n" +
    "# ------------------------ >8 ------------------------\ndiff; anything goes below\n";
  assertEquals(messageText(edited), "tools: add a hook\n\nbody");
  ok(edited);
  ok("Merge branch 'docs'; whatever");
  ok('Revert "tools: add a hook"');
  ok("fixup! tools: add a hook");
  ok("");
});

Deno.test("commit_msg: each rule refuses what breaks it", () => {
  bad("tests: " + "x".repeat(MAX_SUBJECT - 6), `${MAX_SUBJECT + 1} characters; at most ${MAX_SUBJECT}`);
  bad("docs: the final figures; bench: no ratio against a zero", 'joins changes with ";"');
  bad("lab down waits for its namespaces' teardown", 'not "<area>: <what it does>"');
  bad("kube store: start-up reads our Node once", 'not an area: "kube store"');
  bad("memory, tests: a burst is released", 'not an area: "memory"');
  bad("docs/performance.md: lab scale", 'not an area: "docs/performance.md"');
  bad("base, etcd, checks, tests: four at once", "4 areas; at most 3");
  bad("tools: added a hook", '"added": say what the commit does');
  bad("tools: Fixes the hook", '"Fixes": say what the commit does');
  bad("tools: add a hook\nbody at once", "no blank line between the subject and the body");
  bad("tools:add a hook", 'not "<area>: <what it does>"');
});

Deno.test("commit_msg: this checkout's code map gives the areas the project's folders", () => {
  const pages = [...Deno.readDirSync(`${ROOT}/docs`)].map((e) => e.name.replace(/\.md$/, ""));
  const areas = allowedAreas(Deno.readTextFileSync(`${ROOT}/docs/architecture.md`), pages);
  for (const a of ["netlink", "store/kube", "kube", "udp", "worker", "doctor", "docs/performance"]) {
    assert(areas.has(a), a);
  }
});

async function git(cwd: string, ...args: string[]): Promise<{ code: number; stderr: string }> {
  const o = await new Deno.Command("git", {
    args: ["-c", "user.name=t", "-c", "user.email=t@localhost", ...args],
    cwd,
    stdout: "null",
    stderr: "piped",
  }).output();
  return { code: o.code, stderr: new TextDecoder().decode(o.stderr) };
}

Deno.test("commit_msg: `deno task hooks` makes git run the hook, in the checkout and in a worktree", async () => {
  const task = JSON.parse(Deno.readTextFileSync(`${ROOT}/deno.json`)).tasks.hooks as string;
  const dir = await Deno.makeTempDir({ prefix: "flanctl-hooks-" });
  try {
    const repo = `${dir}/repo`;
    await Deno.mkdir(repo);
    assertEquals((await git(repo, "init", "-q")).code, 0);
    const sh = await new Deno.Command("sh", { args: ["-c", task], cwd: repo }).output();
    assertEquals(sh.code, 0, new TextDecoder().decode(sh.stderr));
    // The repository's hook folder as this checkout's (a clone of it would have it as a file).
    await Deno.symlink(`${ROOT}/.githooks`, `${repo}/.githooks`);
    const refused = await git(repo, "commit", "-q", "--allow-empty", "-m", "stuff; more stuff");
    assert(refused.code !== 0, "a bad subject was committed");
    assertStringIncludes(
      refused.stderr,
      'commit-msg: one change per commit: the subject joins changes with ";"',
    );
    assertEquals((await git(repo, "commit", "-q", "--allow-empty", "-m", "tests: start")).code, 0);

    assertEquals((await git(repo, "worktree", "add", "-q", `${dir}/wt`)).code, 0);
    await Deno.symlink(`${ROOT}/.githooks`, `${dir}/wt/.githooks`);
    const inWt = await git(`${dir}/wt`, "commit", "-q", "--allow-empty", "-m", "kube store: x");
    assert(inWt.code !== 0, "a bad subject was committed in a worktree");
    assertStringIncludes(inWt.stderr, 'commit-msg: not an area: "kube store"');
    assertEquals((await git(`${dir}/wt`, "commit", "-q", "--allow-empty", "-m", "kube: x")).code, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
