/**
 * API-server load of the kube store (issue 28, "a good API citizen"): requests and response bytes for a
 * daemon's start (node name, our Node, the lease patch, NetworkUnavailable, the peer list) and for a re-list
 * (after a 410), with 5000 realistic Nodes (~10.7 KB each) in the fake API server (tests/kube_fake_api.ts),
 * with the watch cache (the apiserver's default: `resourceVersion=0` answered whole) and without it (every
 * list paged by `limit`). With BENCH_LIB=<checkout>/lib/store/kube/kube.ts (lib/store/kube.ts before the
 * folder moves) it measures another checkout's store (e.g. the one before this change, which listed
 * consistent pages of 20).
 *
 *   deno run -A bench/kube_requests_bench.ts
 * @module
 */
import { FakeApiServer, TOKEN } from "../tests/kube_fake_api.ts";
import { fillRealistic } from "../tests/kube_nodes_fixture.ts";

const lib = Deno.env.get("BENCH_LIB") ?? new URL("../lib/store/kube/kube.ts", import.meta.url).href;
const { KubeStore } = await import(lib.startsWith("/") ? `file://${lib}` : lib);
const { KubeClient } = await import(lib.replace(/kube\.ts$/, "kube_client.ts").replace(/^\//, "file:///"));

const N = Number(Deno.env.get("BENCH_NODES") ?? 5000);
const dir = await Deno.makeTempDir({ prefix: "flanctl-kube-requests-" });
await Deno.writeTextFile(
  `${dir}/net-conf.json`,
  JSON.stringify({ Network: "10.0.0.0/8", Backend: { Type: "vxlan" } }),
);
const attrs = {
  PublicIP: "10.250.0.1",
  BackendType: "vxlan",
  BackendData: { VNI: 1, VtepMAC: "0e:00:00:ff:ff:01" },
};

async function measure(watchCache: boolean) {
  const api = new FakeApiServer();
  api.watchCache = watchCache;
  fillRealistic(api, N);
  api.upsert("self", { podCIDR: "10.255.1.0/24" });
  const store = new KubeStore(new KubeClient({ server: api.url, token: TOKEN, source: "bench" }), {
    netConfigPath: `${dir}/net-conf.json`,
    env: { NODE_NAME: "self" },
  });
  const mark = () => ({ req: api.requests.length, bytes: api.bytesSent });
  const delta = (m: { req: number; bytes: number }) => ({
    req: api.requests.length - m.req,
    bytes: api.bytesSent - m.bytes,
  });
  let m = mark();
  let t0 = performance.now();
  await store.nodeName();
  await store.storedPublicIP();
  await store.acquireLease(attrs);
  await store.completeLease();
  const { leases } = await store.listLeases();
  const start = { ...delta(m), ms: performance.now() - t0, leases: leases.length };
  m = mark();
  t0 = performance.now();
  await store.listLeases(); // the re-list's query (from the last resourceVersion)
  const relist = { ...delta(m), ms: performance.now() - t0 };
  const queries = api.listQueries.slice(0, 2);
  await store.close();
  await api.close();
  return { start, relist, queries };
}

const mb = (b: number) => (b / 1e6).toFixed(1);
for (const wc of [true, false]) {
  const r = await measure(wc);
  console.log(
    `${N} Nodes, watch cache ${wc ? "on " : "off"}: start ${r.start.req} requests ${mb(r.start.bytes)} MB ` +
      `(${r.start.ms.toFixed(0)} ms, ${r.start.leases} leases); re-list ${r.relist.req} requests ` +
      `${mb(r.relist.bytes)} MB (${r.relist.ms.toFixed(0)} ms); first lists ${r.queries.join(" ")}`,
  );
}
await Deno.remove(dir, { recursive: true });
