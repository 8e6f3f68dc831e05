import { assert, assertEquals } from "../../tests/assert.ts";

const MALLOC = new URL("./malloc.ts", import.meta.url).href;

/**
 * Runs unmapBinaryPages in a fresh Deno process and reports the executable's resident KiB before and after
 * it: `deno test --parallel` runs the other test files as threads of this process, whose code faults the
 * binary's pages back in between the two readings.
 */
async function probe(): Promise<
  { before: number; bytes: number; after: number; runs: boolean; later: number }
> {
  const code = `
    import { unmapBinaryPages } from ${JSON.stringify(MALLOC)};
    /** Resident KiB of this process's mappings of its executable (/proc/self/smaps). */
    function exeRss() {
      const exe = Deno.readLinkSync("/proc/self/exe");
      let kib = 0, inExe = false;
      for (const line of Deno.readTextFileSync("/proc/self/smaps").split("\\n")) {
        const head = /^[0-9a-f]+-[0-9a-f]+ \\S+ [0-9a-f]+ \\S+ \\d+ *(.*)$/.exec(line);
        if (head) inExe = head[1] === exe;
        else if (inExe && line.startsWith("Rss:")) kib += Number(/\\d+/.exec(line)[0]);
      }
      return kib;
    }
    const before = exeRss();
    const bytes = unmapBinaryPages();
    const after = exeRss();
    // The RELRO segment (written by the loader) is skipped: dropping it crashed Deno at the next call.
    await new Promise((r) => setTimeout(r, 10));
    const runs = new Function("x", "return JSON.stringify({ x })")(1) === '{"x":1}';
    console.log(JSON.stringify({ before, bytes, after, runs, later: exeRss() }));
  `;
  const o = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", code],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(o.code, 0, new TextDecoder().decode(o.stderr));
  return JSON.parse(new TextDecoder().decode(o.stdout));
}

Deno.test("unmapBinaryPages: drops most of the Deno binary's resident pages, and the process runs on", async () => {
  const { before, bytes, after, runs, later } = await probe();
  assert(bytes > 0, "some mapping advised");
  assert(after < before / 2, `executable's RSS ${before} → ${after} KiB`);
  assert(runs, "the process runs on after the advice");
  assert(later > 0, "pages fault back in on use");
});
