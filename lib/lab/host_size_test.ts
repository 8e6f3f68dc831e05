import { assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { applyTuning, needFor, refusal, restoreTuning, tuningFor } from "./host_size.ts";
import { labNeighNeed, neighFit } from "../observe/neigh_gc.ts";
import { readState } from "./state.ts";
import type { HostTuning, LabState } from "./types.ts";

const DEFAULTS = { gcThresh1: 128, gcThresh2: 512, gcThresh3: 1024 };
const fit100 = neighFit(
  labNeighNeed({ nodes: 100, podsPerNode: 1, backend: "vxlan", etcd: false }, 4, "6.18.0"),
  53,
  DEFAULTS,
);

Deno.test("lab sizing: the refusal names the numbers and the exact sysctl line", () => {
  const text = refusal("lab x: 100 nodes with 1 pod each", [fit100]);
  assertEquals(text.split("\n"), [
    "lab x: 100 nodes with 1 pod each does not fit the host's neighbour table (shared by every namespace):",
    "  IPv4 neighbour table: the lab needs 21026 entries (underlay 9900, flannel.1 9900 (permanent), pods 200, " +
    "margin 1026), 11126 counted by the collector; the host's table counts 53 now: 11179 against gc_thresh1/2/3 " +
    "128/512/1024 > gc_thresh3",
    "raise the thresholds (host-wide, as root) and run it again:",
    "  sysctl -w net.ipv4.neigh.default.gc_thresh1=16384 net.ipv4.neigh.default.gc_thresh2=32768 " +
    "net.ipv4.neigh.default.gc_thresh3=65536",
    "or pass --tune-host to raise them for the lab's lifetime (lab down restores them)",
  ]);
  // Raised in the order that keeps thresh1 <= thresh2 <= thresh3 at every step.
  assertEquals(tuningFor([fit100]).map((c) => [c.key, c.before, c.after]), [
    ["net.ipv4.neigh.default.gc_thresh3", 1024, 65536],
    ["net.ipv4.neigh.default.gc_thresh2", 512, 32768],
    ["net.ipv4.neigh.default.gc_thresh1", 128, 16384],
  ]);
});

function lab(name: string): LabState {
  return {
    version: 1,
    name,
    dir: "",
    backend: "vxlan",
    store: "file",
    network: "10.244.0.0/16",
    createdAt: "",
    underlay: { netns: "", bridge: "br0", cidr: "", gateway: "" },
    storeFlags: [],
    healthzPort: 1,
    netns: [],
    nodes: [],
    pods: [],
    procs: [],
  };
}

/** Set in the child that runs the --tune-host test (its FLANCTL_LAB_ROOT is the same directory). */
const TUNE_CHILD = "FLANCTL_TUNE_TEST_ROOT";
const TUNE_TEST =
  "lab --tune-host: recorded before the change, restored by down, kept while another lab is up";

// The lab root comes from FLANCTL_LAB_ROOT, and test modules share one process under --parallel: setting it
// here would move every lab started beside this test. The test runs in a child of its own instead.
Deno.test(TUNE_TEST, async () => {
  const root = Deno.env.get(TUNE_CHILD);
  if (root === undefined) {
    const dir = await Deno.makeTempDir({ prefix: "ne-tune-" });
    try {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["test", "-A", "--no-check", "--filter", TUNE_TEST, new URL(import.meta.url).pathname],
        env: { [TUNE_CHILD]: dir, FLANCTL_LAB_ROOT: dir, NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      assertEquals(out.code, 0, text);
      assertStringIncludes(text, "1 passed");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
    return;
  }
  {
    // Stand-in files for /proc/sys (tests never write host sysctls).
    const file = (n: string, v: number) => (Deno.writeTextFileSync(`${root}/${n}`, `${v}\n`), `${root}/${n}`);
    const read = (p: string) => Number(Deno.readTextFileSync(p).trim());
    const changes: HostTuning[] = [
      { key: "net.ipv4.neigh.default.gc_thresh3", path: file("t3", 1024), before: 1024, after: 65536 },
      { key: "net.ipv4.neigh.default.gc_thresh2", path: file("t2", 512), before: 512, after: 32768 },
    ];
    const a = lab("nea");
    const lines = applyTuning(a, changes);
    assertEquals(
      lines[0],
      "--tune-host: net.ipv4.neigh.default.gc_thresh3 1024 -> 65536 (lab down restores 1024)",
    );
    assertEquals([read(changes[0].path), read(changes[1].path)], [65536, 32768]);
    assertEquals(readState("nea")!.hostTuning, changes);

    // Another lab is up and the table still holds more than the old gc_thresh2: the record moves to it,
    // the values stay.
    const b = lab("neb");
    Deno.mkdirSync(`${root}/neb`);
    Deno.writeTextFileSync(`${root}/neb/state.json`, JSON.stringify(b));
    Deno.removeSync(`${root}/nea`, { recursive: true });
    assertEquals(await restoreTuning(a, () => 3000, 300), [
      "host neighbour thresholds stay raised: the table still holds more than the old gc_thresh2 while lab " +
      "neb is up (its lab down restores them)",
    ]);
    assertEquals(read(changes[0].path), 65536);
    const heir = readState("neb")!;
    assertEquals(heir.hostTuning, changes);

    // Restored when the old thresholds hold what is left (another lab may be up); a value someone changed
    // since is left alone.
    Deno.writeTextFileSync(changes[1].path, "40000\n");
    assertEquals(await restoreTuning(heir, () => 100), [
      "net.ipv4.neigh.default.gc_thresh2 is 40000, not the 32768 lab up set: left as is",
      "net.ipv4.neigh.default.gc_thresh3 restored to 1024",
    ]);
    assertEquals([read(changes[0].path), read(changes[1].path)], [1024, 40000]);
    assertStringIncludes(JSON.stringify(await restoreTuning(lab("nec"), () => 100)), "[]");
    // Entries that drop while the torn-down namespaces go are waited for: restored, not handed on.
    const c = lab("ned");
    applyTuning(c, [{ ...changes[0], path: file("t3b", 1024) }, { ...changes[1], path: file("t2b", 512) }]);
    let calls = 0;
    assertEquals(await restoreTuning(c, () => (++calls < 4 ? 3000 : 100), 5000), [
      "net.ipv4.neigh.default.gc_thresh2 restored to 512",
      "net.ipv4.neigh.default.gc_thresh3 restored to 1024",
    ]);
  }
});

Deno.test("lab add-node: only the new node's entries are needed (the table holds the lab's own)", () => {
  const load = (nodes: number) => ({ nodes, podsPerNode: 1, backend: "vxlan" as const, etcd: false });
  const d = needFor(load(21), 4, load(20), "6.18.0");
  assertEquals([d.underlay, d.overlay, d.pods, d.margin, d.counted, d.total], [40, 40, 2, 5, 47, 87]);
});
