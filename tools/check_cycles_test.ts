import { assertEquals } from "../tests/assert.ts";
import { cycles, type Graph, layerGraph, layerOf, loopIn, testOnlyImports } from "./check_cycles.ts";

const g = (edges: Record<string, string[]>): Graph => new Map(Object.entries(edges));

Deno.test("cycles: none in a layered graph", () => {
  assertEquals(cycles(g({ "a.ts": ["b.ts", "c.ts"], "b.ts": ["c.ts"], "c.ts": [] })), []);
});

Deno.test("cycles: a two-module and a three-module cycle, and a self-import", () => {
  const graph = g({
    "cli/root.ts": ["cli/cni.ts"],
    "cli/cni.ts": ["cli/root.ts"],
    "x.ts": ["y.ts"],
    "y.ts": ["z.ts"],
    "z.ts": ["x.ts"],
    "self.ts": ["self.ts"],
    "leaf.ts": [],
  });
  assertEquals(cycles(graph), [["cli/cni.ts", "cli/root.ts"], ["self.ts"], ["x.ts", "y.ts", "z.ts"]]);
  assertEquals(loopIn(graph, ["x.ts", "y.ts", "z.ts"]), ["x.ts", "y.ts", "z.ts", "x.ts"]);
});

Deno.test("cycles: layers of lib/ directories, tests apart", () => {
  assertEquals(layerOf("lib/store/file/file.ts"), "lib/store");
  assertEquals(layerOf("lib/base/errors.ts"), "lib/base");
  assertEquals(layerOf("lib/loose.ts"), "lib/loose.ts");
  assertEquals(layerOf("lib/store/file_test.ts"), "tests");
  assertEquals(layerOf("cli/root.ts"), "cli");
  const graph = g({
    "lib/store/file/file.ts": ["lib/lease/wire.ts"],
    "lib/lease/wire.ts": [],
    "lib/lease/allocator.ts": ["lib/store/types.ts"],
    "lib/store/types.ts": [],
    "lib/store/file_test.ts": ["tests/assert.ts"],
    "tests/assert.ts": [],
  });
  // No module cycle, but the two directories import each other.
  assertEquals(cycles(graph), []);
  assertEquals(cycles(layerGraph(graph)), [["lib/lease", "lib/store"]]);
});

Deno.test("cycles: product code may not import test-only code; tests, benches and unit tests may", () => {
  const graph = g({
    "lib/reconcile/reconciler.ts": ["tests/fake_netlink.ts"],
    "lib/reconcile/reconciler_test.ts": ["tests/fake_netlink.ts"],
    "bench/run.ts": ["tests/netns.ts"],
    "mod.ts": ["tests/lab_verify.ts"],
    "tests/fake_netlink.ts": [],
  });
  assertEquals(testOnlyImports(graph), [
    "lib/reconcile/reconciler.ts -> tests/fake_netlink.ts",
    "mod.ts -> tests/lab_verify.ts",
  ]);
});
