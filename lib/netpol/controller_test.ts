import { assert, assertEquals, assertMatch } from "../../tests/assert.ts";
import { KubeClient } from "../store/kube/kube_client.ts";
import { kubeLimits } from "../store/limits.ts";
import type { NftDriver } from "../firewall/nft.ts";
import { NetpolController } from "./controller.ts";
import { IPNet } from "../base/cidr.ts";
import { Logger } from "../base/log.ts";
import { nsJson, podJson, policyJson } from "../../tests/netpol_fixture.ts";
import { parseDaemonArgs } from "../daemon/options.ts";

type Json = Record<string, unknown>;

/** A fake API server for the three kinds: lists (paged by 1 to exercise `continue`) and one watch stream each. */
function fakeApi(objs: Record<string, Json[]>) {
  const queries: string[] = [];
  const streams = new Map<string, ReadableStreamDefaultController<Uint8Array>>();
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, (req) => {
    const u = new URL(req.url);
    queries.push(`${u.pathname}?${u.searchParams}`);
    const items = objs[u.pathname];
    if (!items) return new Response("{}", { status: 404 });
    if (u.searchParams.get("watch") === "true") {
      const body = new ReadableStream<Uint8Array>({ start: (c) => void streams.set(u.pathname, c) });
      return new Response(body);
    }
    const from = Number(u.searchParams.get("continue") ?? 0);
    const more = from + 1 < items.length;
    return Response.json({
      metadata: { resourceVersion: "10", ...(more ? { continue: String(from + 1) } : {}) },
      items: items.slice(from, from + 1),
    });
  });
  const send = (path: string, ev: Json) =>
    streams.get(path)?.enqueue(new TextEncoder().encode(JSON.stringify(ev) + "\n"));
  return { server, queries, send, url: `http://127.0.0.1:${server.addr.port}`, streams };
}

function recorder(): NftDriver & { scripts: string[] } {
  const scripts: string[] = [];
  return {
    via: "nft",
    scripts,
    run: (t) => (scripts.push(t), Promise.resolve(t.startsWith("list") ? "listing" : "")),
  };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 300 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert(cond(), what);
}

Deno.test("netpol controller: lists (rv=0, pages), one full apply after all three, then a diff per watch event", async () => {
  const api = fakeApi({
    "/api/v1/pods": [
      podJson("x", "a", { labels: { pod: "a" }, ips: ["10.99.1.10"], node: "n1" }),
      podJson("x", "b", { labels: { pod: "b" }, ips: ["10.99.1.11"], node: "n1" }),
    ],
    "/api/v1/namespaces": [nsJson("x")],
    "/apis/networking.k8s.io/v1/networkpolicies": [
      policyJson("x", "deny", { podSelector: { matchLabels: { pod: "a" } } }),
    ],
  });
  const nft = recorder();
  const client = new KubeClient({ server: api.url, source: "test" }, kubeLimits({}));
  const c = new NetpolController({
    client,
    nft,
    node: "n1",
    podCidrs: [IPNet.parse("10.99.1.0/24")],
    log: new Logger({ level: "error" }),
  });
  const ac = new AbortController();
  const run = c.run(ac.signal, 60_000);
  try {
    await until(() => nft.scripts.length === 1, "one full apply");
    assertMatch(nft.scripts[0], /^add table inet flanctl-netpol\ndelete table inet flanctl-netpol\n/);
    assertMatch(nft.scripts[0], /add element inet flanctl-netpol in4 \{ 10\.99\.1\.10 : goto in-\w+ \}/);
    assert(c.enforcing);
    const lists = api.queries.filter((q) => !q.includes("watch=true"));
    assert(lists.includes("/api/v1/pods?limit=500&resourceVersion=0"), lists.join("\n"));
    assert(lists.some((q) => q.startsWith("/api/v1/pods?continue=1")), "the second page");
    await until(() => api.streams.size === 3, "three watches");
    const w = api.queries.filter((q) => q.includes("watch=true"));
    assert(
      w.every((q) => q.includes("allowWatchBookmarks=true") && q.includes("resourceVersion=10")),
      w.join("\n"),
    );
    // A bookmark changes nothing; the policy's deletion is one diff that removes x/a's chain.
    api.send("/apis/networking.k8s.io/v1/networkpolicies", {
      type: "BOOKMARK",
      object: { metadata: { resourceVersion: "11" } },
    });
    api.send("/apis/networking.k8s.io/v1/networkpolicies", {
      type: "DELETED",
      object: policyJson("x", "deny", { podSelector: { matchLabels: { pod: "a" } } }),
    });
    await until(() => nft.scripts.length === 2, "one diff");
    assertMatch(nft.scripts[1], /delete element inet flanctl-netpol in4 \{ 10\.99\.1\.10 \}/);
    assertMatch(nft.scripts[1], /delete chain inet flanctl-netpol in-\w+/);
    assert(!nft.scripts[1].includes("delete table"));
    // A hostile pod (a bad name) is refused and counts as absent; nothing is applied for it.
    api.send("/api/v1/pods", { type: "ADDED", object: { metadata: { namespace: "x", name: "Not A Name" } } });
    await new Promise((r) => setTimeout(r, 100));
    assertEquals(nft.scripts.length, 2);
  } finally {
    ac.abort();
    for (const s of api.streams.values()) {
      try {
        s.close();
      } catch { /* closed */ }
    }
    await run;
    client.close();
    await api.server.shutdown();
  }
});

Deno.test("netpol flag: --network-policy and FLANNELD_NETWORK_POLICY switch it on; off adds nothing", () => {
  assertEquals(parseDaemonArgs(["--network-policy"], {}).daemon.networkPolicy, true);
  assertEquals(parseDaemonArgs([], { FLANNELD_NETWORK_POLICY: "true" }).daemon.networkPolicy, true);
  const off = parseDaemonArgs([], {}).daemon;
  assert(!("networkPolicy" in off), "off: the options are today's, without the key");
});
