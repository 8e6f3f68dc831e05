/**
 * Kube store footprint: under 5000 realistic (~10 KB) Nodes the store keeps only the projected fields, and
 * the list is paginated (`limit`/`continue`) with every node listed exactly once.
 */
import { assert, assertEquals } from "../../../tests/assert.ts";
import { LIST_PAGE_SIZE, LIST_RELEASE_EVERY, listNodesPaged, projectNode } from "./kube_node.ts";
import { KubeClient } from "./kube_client.ts";
import { FakeApiServer, TOKEN } from "../../../tests/kube_fake_api.ts";
import { fillRealistic, realisticNode } from "../../../tests/kube_nodes_fixture.ts";

const PREFIX = "flannel.alpha.coreos.com/";

Deno.test("kube node projection keeps name, resourceVersion, creationTimestamp, podCIDRs and prefixed annotations only", () => {
  const p = projectNode(realisticNode(7, PREFIX, "42"), PREFIX);
  assertEquals(Object.keys(p).sort(), ["metadata", "spec"]);
  assertEquals(Object.keys(p.metadata).sort(), [
    "annotations",
    "creationTimestamp",
    "name",
    "resourceVersion",
  ]);
  assertEquals(p.metadata.creationTimestamp, "2026-12-01T08:00:00Z");
  assertEquals(p.metadata.name, "node-00007");
  assertEquals(p.metadata.resourceVersion, "42");
  assertEquals(Object.keys(p.metadata.annotations!).every((k) => k.startsWith(PREFIX)), true);
  assertEquals(Object.keys(p.metadata.annotations!).length, 4);
  assertEquals(p.spec, { podCIDR: "10.0.7.0/24", podCIDRs: ["10.0.7.0/24"] });
});

Deno.test("kube list under 5000 realistic Nodes: one request to the watch cache, each node once, only projected data kept", async () => {
  const api = new FakeApiServer();
  const client = new KubeClient({ server: api.url, token: TOKEN, source: "test" });
  try {
    fillRealistic(api, 5000, PREFIX);
    const listRv = String(api.rv);
    const { nodes, rv } = await listNodesPaged(client, PREFIX);
    assertEquals(rv, listRv);
    // As client-go's reflector: limit=500 with resourceVersion=0, which the watch cache answers whole.
    assertEquals(api.listQueries, [`?limit=${LIST_PAGE_SIZE}&resourceVersion=0`]);
    const names = nodes.map((n) => n.metadata.name);
    assertEquals(names.length, 5000);
    assertEquals(new Set(names).size, 5000);
    assertEquals(new Set(names), new Set(api.nodes.keys()));
    // Nothing but the projection survives: no labels, images, conditions, addresses, foreign annotations.
    const kept = JSON.stringify(nodes);
    for (const word of ["labels", "images", "conditions", "addresses", "nodeInfo", "kubernetes.io"]) {
      assertEquals(kept.includes(word), false, word);
    }
    const full = [...api.nodes.values()].reduce((s, n) => s + JSON.stringify(n).length, 0);
    assert(kept.length * 20 < full, `kept ${kept.length} of ${full} bytes`);
  } finally {
    client.close();
    await api.close();
  }
});

Deno.test("kube list pagination: a node count that is not a multiple of the page lists each node once", async () => {
  const api = new FakeApiServer();
  api.watchCache = false; // every list paged
  const client = new KubeClient({ server: api.url, token: TOKEN, source: "test" });
  try {
    for (let i = 0; i < 1234; i++) api.upsert(`n${i}`, { podCIDR: `10.1.${i % 256}.0/24` });
    const l = await listNodesPaged(client, PREFIX, {}, 100);
    const { nodes } = l;
    assertEquals(api.listQueries.length, 13);
    // client-go's pager: the continue pages carry the token and the limit, not the resourceVersion.
    assertEquals(api.listQueries[0], "?limit=100&resourceVersion=0");
    assert(api.listQueries.slice(1).every((q) => /^\?continue=[^&]+&limit=100$/.test(q)), api.listQueries[1]);
    assertEquals(l.paginated, true);
    // A re-list from the last resourceVersion keeps the limit when the server paged; its release hook runs
    // after every LIST_RELEASE_EVERY Nodes, across pages, with the Nodes so far kept.
    api.listQueries = [];
    const seen: number[] = [];
    let listed = 0;
    const relist = await listNodesPaged(client, PREFIX, { rv: l.rv, paginated: true }, 100, () => {
      seen.push(api.listQueries.length);
      listed++;
    });
    assertEquals(api.listQueries[0], `?limit=100&resourceVersion=${l.rv}`);
    assertEquals(listed, Math.floor(1234 / LIST_RELEASE_EVERY));
    assertEquals(seen, [Math.ceil(LIST_RELEASE_EVERY / 100)], "during the page that holds the 1000th Node");
    assertEquals(relist.nodes.length, 1234);
    assertEquals(nodes.length, 1234);
    assertEquals(new Set(nodes.map((n) => n.metadata.name)).size, 1234);
  } finally {
    client.close();
    await api.close();
  }
});
