/**
 * readCappedText refuses a symlink out of its directory and follows one inside it (a ConfigMap mount's
 * `..data/` links), and `excerpt` quotes at most a short, escaped excerpt (what every command prints of such
 * a file, as root: tests/files_symlink_test.ts).
 */
import { assert, assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { tempDir } from "../../tests/cni_helpers.ts";
import { EXCERPT_MAX } from "./capped_read.ts";

const MARK = "TOPSECRET";

Deno.test("files: flanctl's readers refuse a symlink out of its directory, follow one inside it", async () => {
  const d = tempDir();
  try {
    const { readCappedText, excerpt } = await import("./capped_read.ts");
    Deno.mkdirSync(`${d.path}/dir/..data`, { recursive: true });
    Deno.writeTextFileSync(`${d.path}/secret`, MARK);
    Deno.writeTextFileSync(`${d.path}/dir/..data/conf`, "ok");
    Deno.symlinkSync(`${d.path}/secret`, `${d.path}/dir/out`);
    Deno.symlinkSync("..data/conf", `${d.path}/dir/conf`);
    Deno.symlinkSync("../secret", `${d.path}/dir/rel`);
    assertEquals(readCappedText(`${d.path}/dir/conf`), "ok");
    for (const p of ["out", "rel"]) {
      let err = "";
      try {
        readCappedText(`${d.path}/dir/${p}`);
      } catch (e) {
        err = (e as Error).message;
      }
      assertStringIncludes(err, "symlink to a file outside");
      assert(!err.includes(MARK) && !err.includes("secret"), err);
    }
    let none = "";
    try {
      readCappedText(`${d.path}/dir/conf`, 1024, "none");
    } catch (e) {
      none = (e as Error).message;
    }
    assertStringIncludes(none, "is a symlink, refused");
    assertEquals(excerpt("a\u001b[2Jb'c"), "'a\\x1b[2Jb\\x27c'");
    assertEquals(excerpt("y".repeat(1000)), `'${"y".repeat(EXCERPT_MAX)}'…`);
  } finally {
    d.cleanup();
  }
});
