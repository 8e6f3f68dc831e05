/**
 * Ctrl-C during `lab up`: once the lab has namespaces and running daemons, SIGINT makes `up` remove
 * everything it made (namespaces, processes, files) and exit 130.
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctlCmd } from "./netns.ts";
import { labDown, labName } from "./lab_fixture.ts";
import { labRoot } from "../lib/lab/paths.ts";
import { readState } from "../lib/lab/state.ts";
import { labLeftovers, waitUntil } from "./lab_verify.ts";

needsRoot.test({
  name: "lab e2e: SIGINT during lab up cleans up everything made so far",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const name = labName("ti");
    const dir = `${labRoot()}/${name}`;
    const argv = flanctlCmd("lab", "up", "--name", name, "--nodes", "2", "--pods-per-node", "3");
    const child = new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped", stderr: "piped" })
      .spawn();
    try {
      // Interrupt once daemons run (the most state there is to undo: processes, namespaces, files).
      await waitUntil(
        "daemons started",
        () => {
          const s = readState(name);
          return Promise.resolve((s?.procs.length ?? 0) >= 1);
        },
        60_000,
        20,
      );
      child.kill("SIGINT");
      const o = await child.output();
      const err = new TextDecoder().decode(o.stderr);
      assertEquals(o.code, 130, err);
      assertStringIncludes(err, "interrupted");
      assertEquals(await labLeftovers(name, dir), []);
    } finally {
      try {
        child.kill("SIGKILL");
      } catch { /* exited */ }
      await labDown(name);
    }
  },
});
