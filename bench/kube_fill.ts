/**
 * Creates realistic Nodes (tests/kube_nodes_fixture.ts, ~10 KB each, flannel annotations included) through a
 * kube-apiserver as the admin (client certificate), `concurrency` requests in flight. Run inside the API
 * server's namespace by bench/kube_apiserver_bench.ts:
 *
 *   deno run -A bench/kube_fill.ts <url> <ca> <cert> <key> <from> <count> [concurrency]
 * @module
 */
import { realisticNode } from "../tests/kube_nodes_fixture.ts";

const [url, ca, cert, key, from, count, conc = "24"] = Deno.args;
const client = Deno.createHttpClient({
  caCerts: [Deno.readTextFileSync(ca)],
  cert: Deno.readTextFileSync(cert),
  key: Deno.readTextFileSync(key),
});
let next = Number(from);
const end = next + Number(count);
async function worker(): Promise<void> {
  while (next < end) {
    const i = next++;
    const n = realisticNode(i) as unknown as { metadata: Record<string, unknown> };
    delete n.metadata.resourceVersion;
    delete n.metadata.uid;
    for (let attempt = 0;; attempt++) {
      const r = await fetch(`${url}/api/v1/nodes`, {
        method: "POST",
        client,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(n),
      });
      const body = await r.text();
      if (r.ok || r.status === 409) break;
      if (attempt >= 5) throw new Error(`node ${i}: HTTP ${r.status} ${body.slice(0, 200)}`);
      await new Promise((res) => setTimeout(res, 200 * (attempt + 1)));
    }
  }
}
await Promise.all(Array.from({ length: Number(conc) }, worker));
client.close();
