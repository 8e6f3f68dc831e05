import { assertEquals } from "../../tests/assert.ts";
import { gatherSnapshot } from "./snapshot.ts";
import { localSnapshotOptions } from "./local_options.ts";

// `--netns ..` names /var/run itself (it exists): netnsPath's name check makes it "not found" before any
// probe opens or stats it, as `ip netns` would refuse the name.
for (const name of ["..", "."]) {
  Deno.test(`snapshot: --netns ${JSON.stringify(name)} is refused as not found`, async () => {
    const opts = localSnapshotOptions(name, "/nonexistent/subnet.env", { storeDir: "/nonexistent/store" });
    const ctx = await gatherSnapshot({ ...opts, criSocket: null });
    assertEquals(ctx.fatal, [`network namespace '${name}' not found (see 'ip netns list')`]);
  });
}
