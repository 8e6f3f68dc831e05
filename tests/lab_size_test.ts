/**
 * `lab up` sizes itself against the host's neighbour tables (shared by every namespace): a node count
 * that cannot fit the host's current gc_thresh3 is refused up front with the numbers and the sysctl line,
 * and nothing is made (no namespace, no lab directory). The host's thresholds are only read.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, TEST_PREFIX } from "./netns.ts";
import { hostFits, MAX_NODES } from "../lib/lab/mod.ts";
import { listNetns } from "../lib/lab/down.ts";
import { labNeighNeed } from "../lib/observe/neigh_gc.ts";

/** The smallest node count (1 pod each) that does not fit this host now, or null when even MAX_NODES does. */
function tooMany(): number | null {
  for (let n = 2; n <= MAX_NODES; n++) {
    if (hostFits({ nodes: n, podsPerNode: 1, backend: "vxlan", etcd: false }, [4]).some((f) => !f.fits)) {
      // Other tests' labs come and go: a margin of nodes keeps it from fitting a moment later.
      return Math.min(MAX_NODES, n + 10);
    }
  }
  return null;
}

const nodes = tooMany();

needsRoot.test({
  name: "lab up: a node count the host's neighbour table cannot hold is refused up front, nothing made",
  ignore: nodes === null, // the host's gc_thresh3 holds even MAX_NODES nodes: nothing to refuse
  async fn() {
    const root = await Deno.makeTempDir({ prefix: "flanctl-labroot-" });
    const name = `${TEST_PREFIX}sz`.slice(0, 8);
    try {
      const before = (await listNetns()).filter((n) => n.startsWith(name));
      const r = await flanctl(
        ["lab", "up", "--name", name, "--nodes", String(nodes), "--pods-per-node", "1"],
        {
          env: { FLANCTL_LAB_ROOT: root },
        },
      );
      assertEquals(r.code, 1, r.stdout + r.stderr);
      assertStringIncludes(
        r.stderr,
        `lab ${name}: ${nodes} nodes with 1 pod each does not fit the host's neighbour table`,
      );
      const need = labNeighNeed({ nodes: nodes!, podsPerNode: 1, backend: "vxlan", etcd: false }, 4);
      assertStringIncludes(
        r.stderr,
        `the lab needs ${need.total} entries (underlay ${nodes! * (nodes! - 1)}, `,
      );
      const gt3 = Deno.readTextFileSync("/proc/sys/net/ipv4/neigh/default/gc_thresh3").trim();
      assertStringIncludes(r.stderr, `/${gt3} > gc_thresh3`);
      assert(
        /\n {2}sysctl -w net\.ipv4\.neigh\.default\.gc_thresh1=\d+ .*gc_thresh3=\d+\n/.test(r.stderr),
        r.stderr,
      );
      assertStringIncludes(r.stderr, "or pass --tune-host");
      // Nothing made: no lab directory, no namespace.
      assertEquals([...Deno.readDirSync(root)].map((e) => e.name), []);
      assertEquals((await listNetns()).filter((n) => n.startsWith(name)), before);
      // The thresholds are untouched.
      assertEquals(Deno.readTextFileSync("/proc/sys/net/ipv4/neigh/default/gc_thresh3").trim(), gt3);
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
});

Deno.test("lab up: --nodes is bounded by the underlay /24", async () => {
  const r = await flanctl(["lab", "up", "--name", `${TEST_PREFIX}sz`.slice(0, 8), "--nodes", "201"]);
  assertEquals(r.code, 2, r.stderr);
  assertStringIncludes(r.stderr, "--nodes 201: give a whole number from 1 to 200");
});
