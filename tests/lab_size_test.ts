/**
 * `lab up` sizes itself against the host's neighbour tables (shared by every namespace): a node count
 * that cannot fit the host's current gc_thresh3 is refused up front with the numbers and the sysctl line,
 * and nothing is made (no namespace, no lab directory). The host's thresholds are only read.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, TEST_PREFIX } from "./netns.ts";
import { MAX_NODES } from "../lib/lab/mod.ts";
import { listNetns } from "../lib/lab/down.ts";
import { hostThresholds, labNeighNeed, neighFit } from "../lib/observe/neigh_gc.ts";

/**
 * The smallest node count (1 pod each) that does not fit this host's IPv4 table even empty, or null when
 * even MAX_NODES does. From the thresholds alone: the entries other tests' labs hold come and go, so a
 * count that does not fit now may fit a moment later; one that does not fit an empty table never fits.
 */
function tooMany(): number | null {
  const th = hostThresholds(4);
  if (!th) return null;
  for (let n = 2; n <= MAX_NODES; n++) {
    const need = labNeighNeed({ nodes: n, podsPerNode: 1, backend: "vxlan", etcd: false }, 4);
    if (!neighFit(need, 0, th).fits) return n;
  }
  return null;
}

const nodes = tooMany();

needsRoot.test({
  name: "lab up: a node count the host's neighbour table cannot hold is refused up front, nothing made",
  // The host's gc_thresh3 holds even MAX_NODES nodes (or is unreadable): nothing to refuse.
  ignore: nodes === null,
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
      // Had `lab up` made the lab after all, it goes before its root does (else its namespaces stay); the
      // last lab down removes the root itself.
      if ([...Deno.readDirSync(root)].length) {
        await flanctl(["lab", "down", "--name", name], { env: { FLANCTL_LAB_ROOT: root } });
      }
      await Deno.remove(root, { recursive: true }).catch((e) => {
        if (!(e instanceof Deno.errors.NotFound)) throw e;
      });
    }
  },
});
