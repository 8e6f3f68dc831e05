import { assert, assertEquals } from "../../tests/assert.ts";
import { openRecord, PRUNE_EVERY_MS, pruneIfDue, RECORD_KEEP_MS, recordName } from "./deleted.ts";

Deno.test("deleted records: names only for what the launcher can look up", () => {
  assertEquals(recordName("flannel", "abc123", "eth0"), "flannel:eth0:abc123");
  for (
    const [id, ifname] of [["a/b", "eth0"], ["abc", "e:th"], ["abc", ".."], ["ab c", "eth0"], ["", "eth0"]]
  ) {
    assertEquals(recordName("flannel", id, ifname), null, `${id} ${ifname}`);
  }
  assertEquals(recordName("flannel", "a".repeat(250), "eth0"), null, "longer than a file name");
});

Deno.test("deleted records: ADD empties, DEL fills, old ones are pruned at most once per interval", () => {
  const dir = `${Deno.makeTempDirSync()}/deleted`; // made on first use
  try {
    const r = openRecord(dir, "loopback:lo:c1")!;
    r.markDeleted();
    r.close();
    assertEquals(Deno.readTextFileSync(`${dir}/loopback:lo:c1`), "deleted\n");
    const a = openRecord(dir, "loopback:lo:c1")!;
    a.clear();
    a.close();
    assertEquals(Deno.readTextFileSync(`${dir}/loopback:lo:c1`), "");
    // An old record and a recent one; the stamp of the first prune above is recent: nothing pruned yet.
    const old = new Date(Date.now() - RECORD_KEEP_MS - 60_000);
    Deno.writeTextFileSync(`${dir}/flannel:eth0:old`, "deleted\n");
    Deno.utimeSync(`${dir}/flannel:eth0:old`, old, old);
    pruneIfDue(dir);
    assert(Deno.statSync(`${dir}/flannel:eth0:old`).isFile, "not due yet");
    pruneIfDue(dir, Date.now() + PRUNE_EVERY_MS + 1000);
    assertEquals([...Deno.readDirSync(dir)].map((e) => e.name).sort(), [".pruned", "loopback:lo:c1"]);
  } finally {
    Deno.removeSync(dir.slice(0, -"/deleted".length), { recursive: true });
  }
});

Deno.test("deleted records: pruning removes only records, never other files of the directory", () => {
  // The directory comes from the environment (a compiled binary has no launcher to set it): whatever else
  // is there is not ours to remove.
  const dir = Deno.makeTempDirSync();
  try {
    const old = new Date(Date.now() - RECORD_KEEP_MS - 60_000);
    for (const name of ["flannel:eth0:old", "notes.txt", "a:b", "flannel:eth0:x:y", "-:eth0:c1"]) {
      Deno.writeTextFileSync(`${dir}/${name}`, "kept\n");
      Deno.utimeSync(`${dir}/${name}`, old, old);
    }
    pruneIfDue(dir);
    assertEquals([...Deno.readDirSync(dir)].map((e) => e.name).sort(), [
      "-:eth0:c1",
      ".pruned",
      "a:b",
      "flannel:eth0:x:y",
      "notes.txt",
    ]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("deleted records: no flock, or removed under every wait, is no record rather than a hang", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const noFlock = openRecord(dir, "flannel:eth0:c1", () => {
      throw new Deno.errors.NotSupported("flock");
    });
    assertEquals(noFlock, null);
    let locks = 0;
    const pruned = openRecord(dir, "flannel:eth0:c2", () => {
      locks++;
      Deno.removeSync(`${dir}/flannel:eth0:c2`); // a pruner removed it while we waited, every time
    });
    assertEquals(pruned, null);
    assert(locks > 1 && locks <= 16, `${locks} tries`);
    const ok = openRecord(dir, "flannel:eth0:c3")!;
    ok.close();
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
