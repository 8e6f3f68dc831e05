import { assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { addrList, readKubeRecord, writeKubeRecord } from "./kube_status.ts";

// The lab's directory is passed, not FLANCTL_LAB_ROOT set: the process env is shared by the test files
// running beside this one (--parallel) and by every child they start.
Deno.test("kube status: the record round-trips, and a bad one is refused or cleaned", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-kubestatus-" });
  try {
    const r = {
      name: "ks1",
      nodes: 2,
      ipFamily: "dual" as const,
      network: "10.244.0.0/16,fc00:244::/48",
      backend: "vxlan",
      proxyMode: "nftables",
      createdAt: "2026-12-06T00:00:00.000Z",
      kubeletPids: [0, 4242],
    };
    writeKubeRecord(r, dir);
    assertEquals(readKubeRecord("ks1", dir), r);
    assertEquals(readKubeRecord("nosuchlab", `${dir}/nosuchlab`), null);
    Deno.writeTextFileSync(
      `${dir}/kube.json`,
      JSON.stringify({ ...r, backend: "vx\x1blan", kubeletPids: [-1, "x", 7] }),
    );
    const c = readKubeRecord("ks1", dir)!;
    assertEquals(c.backend, "vx?lan");
    assertEquals(c.ipFamily, "dual");
    // A record from before --ip-family, or one naming a family the lab does not build: IPv4.
    const { ipFamily: _f, ...old } = r;
    Deno.writeTextFileSync(`${dir}/kube.json`, JSON.stringify(old));
    assertEquals(readKubeRecord("ks1", dir)!.ipFamily, "ipv4");
    Deno.writeTextFileSync(`${dir}/kube.json`, JSON.stringify({ ...r, ipFamily: "ipv6\x1b" }));
    assertEquals(readKubeRecord("ks1", dir)!.ipFamily, "ipv4");
    assertEquals(c.kubeletPids, [0, 0]);
    Deno.writeTextFileSync(`${dir}/kube.json`, JSON.stringify({ ...r, nodes: 5000 }));
    let err = "";
    try {
      readKubeRecord("ks1", dir);
    } catch (e) {
      err = String(e);
    }
    assertStringIncludes(err, "no valid node count");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("kube status: a pod's and a node's addresses of both families, validated", () => {
  assertEquals(
    addrList([{ ip: "10.244.1.5" }, { ip: "fc00:244:0:1::5" }], (x) => x?.ip),
    ["10.244.1.5", "fc00:244:0:1::5"],
  );
  assertEquals(addrList(["10.244.1.0/24", "fc00:244:0:1::/64"], (c) => c), [
    "10.244.1.0/24",
    "fc00:244:0:1::/64",
  ]);
  assertEquals(addrList([{ ip: "10.0.0.1\x1b[31m" }, { ip: 7 }, null], (x) => x?.ip), []);
  assertEquals(addrList("10.0.0.1", (x) => x), []);
  assertEquals(addrList([{ ip: "1.1.1.1" }, { ip: "2.2.2.2" }, { ip: "3.3.3.3" }], (x) => x?.ip).length, 2);
});
