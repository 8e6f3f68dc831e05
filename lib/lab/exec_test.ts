import { assert, assertEquals } from "../../tests/assert.ts";
import { ensureMountPoints, removeIfLastLab, removeMountPoints } from "./exec.ts";
import { pathExists } from "../base/exists.ts";

const EXEC_TS = new URL("./exec.ts", import.meta.url).href;

function records(root: string): string[] {
  try {
    return Deno.readTextFileSync(`${root}/mountpoints.txt`).split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

/** A child Deno process calling `call` (ensure or remove) in a loop for `ms`, with FLANCTL_LAB_ROOT=root. */
function hammer(root: string, call: string, ms: number): Promise<Deno.CommandOutput> {
  const code = `import * as x from ${JSON.stringify(EXEC_TS)};
const end = Date.now() + ${ms};
while (Date.now() < end) ${call};`;
  return new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", code],
    env: { FLANCTL_LAB_ROOT: root },
    stdout: "null",
    stderr: "piped",
  }).output();
}

Deno.test("mount points: creation is recorded, removal takes only empty recorded dirs", () => {
  const tmp = Deno.makeTempDirSync({ prefix: "flanctl-mp-" });
  try {
    const root = `${tmp}/root`;
    Deno.mkdirSync(`${tmp}/t/pre`, { recursive: true });
    ensureMountPoints([`${tmp}/t/pre/a`, `${tmp}/t/b/c`], root);
    assertEquals(records(root).sort(), [`${tmp}/t/b`, `${tmp}/t/b/c`, `${tmp}/t/pre/a`]);
    Deno.writeTextFileSync(`${tmp}/t/pre/a/busy`, "");
    removeMountPoints(root);
    assert(!pathExists(`${tmp}/t/b`));
    assert(pathExists(`${tmp}/t/pre/a`)); // not empty: kept, and still recorded
    assertEquals(records(root), [`${tmp}/t/pre/a`]);
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
});

Deno.test("mount points: the last lab removes them and the root; not while another lab is there", () => {
  const tmp = Deno.makeTempDirSync({ prefix: "flanctl-mp-" });
  try {
    const root = `${tmp}/root`;
    ensureMountPoints([`${tmp}/t/a`], root);
    Deno.mkdirSync(`${root}/other`);
    assertEquals(removeIfLastLab(root), false);
    assert(pathExists(`${tmp}/t/a`));
    Deno.removeSync(`${root}/other`);
    assertEquals(removeIfLastLab(root), true);
    assert(!pathExists(`${tmp}/t/a`));
    assert(!pathExists(root));
    ensureMountPoints([`${tmp}/t/a`], root); // recreates the root and the lock
    assertEquals(records(root), [`${tmp}/t`, `${tmp}/t/a`]);
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
});

Deno.test("mount points: concurrent ensure and remove lose no record", async () => {
  const tmp = Deno.makeTempDirSync({ prefix: "flanctl-mp-" });
  try {
    const root = `${tmp}/root`;
    const dirs = [`${tmp}/t/a/b`, `${tmp}/t/c`];
    const outs = await Promise.all([
      hammer(root, `x.ensureMountPoints(${JSON.stringify(dirs)})`, 1500),
      hammer(root, "x.removeMountPoints()", 1500),
    ]);
    for (const o of outs) assertEquals(o.code, 0, new TextDecoder().decode(o.stderr));
    // Every directory that exists was created by ensure, so it must be recorded for the last `lab down`.
    const rec = new Set(records(root));
    for (const d of [`${tmp}/t`, `${tmp}/t/a`, ...dirs]) {
      if (pathExists(d)) assert(rec.has(d), `${d} exists but is not recorded`);
    }
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
});
