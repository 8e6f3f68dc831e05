/**
 * `lab up`'s connectivity check tells the truth: a working lab is one verdict line (no per-pair wall);
 * a lab with a dead daemon and a deleted route fails with exactly the broken pairs, each explained (the
 * daemon, the missing route), after the silent pairs were asked three times.
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl } from "./netns.ts";
import { killLabProc, withLab } from "./lab_fixture.ts";
import { run } from "./netns.ts";

needsRoot.test({
  name: "lab check: one verdict for a working lab; a dead daemon + a missing route explained pair by pair",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab("ck", ["--nodes", "4", "--pods-per-node", "1"], 12, async (s, name) => {
      const ok = await flanctl(["lab", "check", "--name", name, "--parallel", "4"]);
      assertEquals(ok.code, 0, ok.stdout + ok.stderr);
      assertEquals(ok.stdout.trim().split("\n").length, 3, ok.stdout);
      assertStringIncludes(ok.stdout, "daemons: every one reports all 3 peers");
      assertStringIncludes(
        ok.stdout,
        "cross-node ping: 12 pairs (every pod to the first pod of every other node), 4 at a time",
      );
      assertStringIncludes(ok.stdout, "all 12 ok");

      // Break node2: its daemon dies (nothing repairs) and its route to node3's pods goes.
      await killLabProc(s, "daemon node2");
      const p3 = s.pods.find((p) => p.node === "node3")!, p2 = s.pods.find((p) => p.node === "node2")!;
      const sub3 = p3.ip!.replace(/\.\d+$/, ".0/24");
      const del = await run(["ip", "-n", s.nodes[1].netns, "route", "del", sub3]);
      assertEquals(del.code, 0, del.stderr);
      const bad = await flanctl(["lab", "check", "--name", name]);
      assertEquals(bad.code, 1, bad.stdout + bad.stderr);
      assertStringIncludes(bad.stdout, "daemons: 1 not converged after");
      assertStringIncludes(bad.stdout, "node2 not running");
      const failed = bad.stdout.split("\n").filter((l) => l.includes("FAILED:")).sort();
      assertEquals(failed, [
        `  node2-pod1 -> node3-pod1 (${p3.ip}): FAILED: the daemon on node2 is not running; node2 has no route ` +
        `to ${p3.ip} (but the default)`,
        `  node3-pod1 -> node2-pod1 (${p2.ip}): FAILED: the daemon on node2 is not running; node2 has no route ` +
        `to ${p3.ip} (but the default)`,
      ]);
      assertStringIncludes(bad.stdout, "2 of 12 FAILED after 3 tries");
      // The neighbour table is shown as not the cause.
      assertStringIncludes(bad.stdout, "arp_cache: ");
    });
  },
});
