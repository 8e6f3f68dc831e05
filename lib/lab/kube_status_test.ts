import { assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { readKubeRecord, writeKubeRecord } from "./kube_status.ts";
import { labDir } from "./paths.ts";

Deno.test("kube status: the record round-trips, and a bad one is refused or cleaned", async () => {
  const root = await Deno.makeTempDir({ prefix: "flanctl-kubestatus-" });
  const old = Deno.env.get("FLANCTL_LAB_ROOT");
  Deno.env.set("FLANCTL_LAB_ROOT", root);
  try {
    Deno.mkdirSync(labDir("ks1"), { recursive: true });
    const r = {
      name: "ks1",
      nodes: 2,
      network: "10.244.0.0/16",
      backend: "vxlan",
      proxyMode: "nftables",
      createdAt: "2026-12-06T00:00:00.000Z",
      kubeletPids: [0, 4242],
    };
    writeKubeRecord(r);
    assertEquals(readKubeRecord("ks1"), r);
    assertEquals(readKubeRecord("nosuchlab"), null);
    Deno.writeTextFileSync(
      `${labDir("ks1")}/kube.json`,
      JSON.stringify({ ...r, backend: "vx\x1blan", kubeletPids: [-1, "x", 7] }),
    );
    const c = readKubeRecord("ks1")!;
    assertEquals(c.backend, "vx?lan");
    assertEquals(c.kubeletPids, [0, 0]);
    Deno.writeTextFileSync(`${labDir("ks1")}/kube.json`, JSON.stringify({ ...r, nodes: 5000 }));
    let err = "";
    try {
      readKubeRecord("ks1");
    } catch (e) {
      err = String(e);
    }
    assertStringIncludes(err, "no valid node count");
  } finally {
    if (old === undefined) Deno.env.delete("FLANCTL_LAB_ROOT");
    else Deno.env.set("FLANCTL_LAB_ROOT", old);
    await Deno.remove(root, { recursive: true });
  }
});
