/**
 * Kubernetes store against an in-test fake API server (Deno.serve on loopback) that follows the API's
 * semantics for what the store uses: a global resourceVersion, LIST with metadata.resourceVersion, WATCH
 * as a stream of JSON lines from a resourceVersion (410 Gone as an ERROR event when it is older than the
 * retained history), merge-patch / strategic-merge-patch content types (415 otherwise), 409 on a stale
 * metadata.resourceVersion precondition, bearer-token auth (401).
 */
import { assertEquals, assertRejects, assertStringIncludes } from "./assert.ts";
import { openKubeStore, PodCidrNotAssignedError } from "../lib/store/kube.ts";
import type { LeaseEvent } from "../lib/store/types.ts";
import { leaseCli, nextEvents } from "./store_helpers.ts";

type Json = Record<string, unknown>;
interface Node {
  metadata: { name: string; resourceVersion: string; annotations: Record<string, string> };
  spec: { podCIDR?: string; podCIDRs?: string[] };
  status: { conditions: Json[] };
}

const TOKEN = "s3cret-token";

class FakeApiServer {
  nodes = new Map<string, Node>();
  rv = 100;
  history: { rv: number; type: string; node: Node }[] = [];
  /** Watches asking for a resourceVersion below this get 410 Gone. */
  oldestRv = 0;
  patches: { path: string; contentType: string; body: Json }[] = [];
  /** Number of 409s to return before accepting a precondition patch (to exercise the retry). */
  forceConflicts = 0;
  /** While set, new watch requests wait (as if the client were partitioned away). */
  hold = false;
  goneSent = 0;
  #held: (() => void)[] = [];
  #watchers = new Set<ReadableStreamDefaultController<Uint8Array>>();
  #server: Deno.HttpServer<Deno.NetAddr>;
  url: string;

  constructor() {
    this.#server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (r) => this.#handle(r));
    this.url = `http://127.0.0.1:${this.#server.addr.port}`;
  }

  #emit(type: string, node: Node) {
    this.history.push({ rv: Number(node.metadata.resourceVersion), type, node: structuredClone(node) });
    const line = new TextEncoder().encode(JSON.stringify({ type, object: node }) + "\n");
    for (const w of this.#watchers) {
      try {
        w.enqueue(line);
      } catch { /* closed */ }
    }
  }

  upsert(name: string, spec: Node["spec"], annotations: Record<string, string> = {}) {
    const existed = this.nodes.has(name);
    const n: Node = {
      metadata: { name, resourceVersion: String(++this.rv), annotations },
      spec,
      status: { conditions: [] },
    };
    this.nodes.set(name, n);
    this.#emit(existed ? "MODIFIED" : "ADDED", n);
  }

  remove(name: string) {
    const n = this.nodes.get(name)!;
    this.nodes.delete(name);
    n.metadata.resourceVersion = String(++this.rv);
    this.#emit("DELETED", n);
  }

  /** Forgets history (as etcd compaction does): older watches get 410. Closes open watches. */
  compact() {
    this.oldestRv = this.rv + 1;
    this.history = [];
    for (const w of this.#watchers) {
      try {
        w.close();
      } catch { /* closed */ }
    }
    this.#watchers.clear();
  }

  /** Lets held watch requests proceed. */
  release() {
    this.hold = false;
    for (const f of this.#held.splice(0)) f();
  }

  #status(code: number, reason: string, message: string) {
    return Response.json({ kind: "Status", apiVersion: "v1", status: "Failure", code, reason, message }, {
      status: code,
    });
  }

  async #handle(req: Request): Promise<Response> {
    if (req.headers.get("authorization") !== `Bearer ${TOKEN}`) {
      return this.#status(401, "Unauthorized", "bad token");
    }
    const u = new URL(req.url);
    const m = /^\/api\/v1\/nodes(?:\/([^/]+))?(\/status)?$/.exec(u.pathname);
    if (!m) return this.#status(404, "NotFound", `no route ${u.pathname}`);
    const [, name, status] = m;
    if (!name && req.method === "GET" && u.searchParams.get("watch") === "1") {
      const from = Number(u.searchParams.get("resourceVersion") ?? this.rv);
      const body = new ReadableStream<Uint8Array>({
        start: (c) => {
          const begin = () => {
            const enc = new TextEncoder();
            if (from < this.oldestRv - 1) {
              this.goneSent++;
              const gone = {
                kind: "Status",
                status: "Failure",
                code: 410,
                reason: "Expired",
                message: "too old",
              };
              c.enqueue(enc.encode(JSON.stringify({ type: "ERROR", object: gone }) + "\n"));
              c.close();
              return;
            }
            for (const h of this.history) {
              if (h.rv > from) c.enqueue(enc.encode(JSON.stringify({ type: h.type, object: h.node }) + "\n"));
            }
            this.#watchers.add(c);
          };
          if (this.hold) this.#held.push(begin);
          else begin();
        },
        cancel: () => {},
      });
      return new Response(body, { headers: { "content-type": "application/json" } });
    }
    if (!name && req.method === "GET") {
      return Response.json({
        kind: "NodeList",
        metadata: { resourceVersion: String(this.rv) },
        items: [...this.nodes.values()],
      });
    }
    const node = name ? this.nodes.get(decodeURIComponent(name)) : undefined;
    if (!node) return this.#status(404, "NotFound", `nodes "${name}" not found`);
    if (req.method === "GET") return Response.json(node);
    if (req.method !== "PATCH") return this.#status(405, "MethodNotAllowed", req.method);
    const ct = req.headers.get("content-type") ?? "";
    if (!["application/merge-patch+json", "application/strategic-merge-patch+json"].includes(ct)) {
      return this.#status(415, "UnsupportedMediaType", `unsupported patch type ${ct}`);
    }
    const body = await req.json() as Json;
    this.patches.push({ path: u.pathname, contentType: ct, body });
    const meta = (body.metadata ?? {}) as Json;
    if (meta.resourceVersion !== undefined) {
      if (this.forceConflicts > 0 || meta.resourceVersion !== node.metadata.resourceVersion) {
        if (this.forceConflicts > 0) {
          this.forceConflicts--;
          node.metadata.resourceVersion = String(++this.rv); // someone else changed it
          this.#emit("MODIFIED", node);
        }
        return this.#status(
          409,
          "Conflict",
          "the object has been modified; please apply your changes to the latest version",
        );
      }
    }
    if (status && ct !== "application/strategic-merge-patch+json") {
      return this.#status(
        415,
        "UnsupportedMediaType",
        "the status subresource takes a strategic merge patch here",
      );
    }
    // Conditions merge by their "type" key (strategic merge); annotations merge by key (null deletes).
    for (const c of ((body.status as Json)?.conditions ?? []) as Json[]) {
      if (!status) return this.#status(422, "Invalid", "status changes must go to the status subresource");
      const i = node.status.conditions.findIndex((x) => x.type === c.type);
      if (i >= 0) node.status.conditions[i] = { ...node.status.conditions[i], ...c };
      else node.status.conditions.push(c);
    }
    for (const [k, v] of Object.entries((meta.annotations ?? {}) as Record<string, string | null>)) {
      if (v === null) delete node.metadata.annotations[k];
      else node.metadata.annotations[k] = v;
    }
    node.metadata.resourceVersion = String(++this.rv);
    this.#emit("MODIFIED", node);
    return Response.json(node);
  }

  async close() {
    for (const w of this.#watchers) {
      try {
        w.close();
      } catch { /* closed */ }
    }
    await this.#server.shutdown();
  }
}

const NETCONF = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } });

async function setup() {
  const api = new FakeApiServer();
  const dir = await Deno.makeTempDir({ prefix: "flanctl-kube-" });
  await Deno.writeTextFile(`${dir}/net-conf.json`, NETCONF);
  await Deno.writeTextFile(
    `${dir}/kubeconfig`,
    `apiVersion: v1
kind: Config
current-context: lab
clusters:
- name: lab
  cluster:
    server: ${api.url}
contexts:
- name: lab
  context: {cluster: lab, user: flanctl}
users:
- name: flanctl
  user:
    token: ${TOKEN}
`,
  );
  const open = (node: string) =>
    openKubeStore({
      kubeconfigFile: `${dir}/kubeconfig`,
      nodeName: node,
      netConfigPath: `${dir}/net-conf.json`,
    });
  return {
    api,
    dir,
    open,
    async cleanup() {
      await api.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

const attrs = {
  PublicIP: "192.0.2.1",
  PublicIPv6: null,
  BackendType: "vxlan",
  BackendData: { VNI: 1, VtepMAC: "0e:aa:00:00:00:01" },
};

Deno.test("kube store: lease from podCIDR, annotations and NetworkUnavailable condition patched", async () => {
  const t = await setup();
  try {
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] });
    t.api.forceConflicts = 1; // someone else modified the node between our GET and PATCH
    const s = await t.open("n1");
    const l = await s.acquireLease(attrs);
    assertEquals(String(l.subnet), "10.244.1.0/24");
    const ann = t.api.nodes.get("n1")!.metadata.annotations;
    assertEquals(ann, {
      "flannel.alpha.coreos.com/backend-type": "vxlan",
      "flannel.alpha.coreos.com/kube-subnet-manager": "true",
      "flannel.alpha.coreos.com/backend-data": `{"VNI":1,"VtepMAC":"0e:aa:00:00:00:01"}`,
      "flannel.alpha.coreos.com/public-ip": "192.0.2.1",
    });
    const cond = t.api.nodes.get("n1")!.status.conditions;
    assertEquals(cond.map((c) => [c.type, c.status, c.reason]), [[
      "NetworkUnavailable",
      "False",
      "FlannelIsUp",
    ]]);
    assertEquals(t.api.patches.map((p) => [p.path, p.contentType]), [
      ["/api/v1/nodes/n1/status", "application/strategic-merge-patch+json"], // 409: node changed meanwhile
      ["/api/v1/nodes/n1/status", "application/strategic-merge-patch+json"], // annotations
      ["/api/v1/nodes/n1/status", "application/strategic-merge-patch+json"], // condition
    ]);
    const r = await s.renewLease(l);
    assertEquals(String(r.subnet), "10.244.1.0/24");
    await assertRejects(() => s.revokeLease(l.subnet!), Error, "not supported with --kube-subnet-mgr");
    await s.close();
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: pod cidr not assigned / outside Network / unknown node / bad token", async () => {
  const t = await setup();
  try {
    t.api.upsert("bare", {});
    t.api.upsert("far", { podCIDR: "10.9.1.0/24" });
    await assertRejects(
      async () => (await t.open("bare")).acquireLease(attrs),
      PodCidrNotAssignedError,
      "pod cidr not assigned",
    );
    await assertRejects(
      async () => (await t.open("far")).acquireLease(attrs),
      Error,
      "is not inside Network 10.244.0.0/16",
    );
    await assertRejects(
      async () => (await t.open("ghost")).acquireLease(attrs),
      Error,
      `node "ghost" not found`,
    );
    await Deno.writeTextFile(
      `${t.dir}/kubeconfig`,
      (await Deno.readTextFile(`${t.dir}/kubeconfig`)).replace(TOKEN, "wrong"),
    );
    await assertRejects(async () => (await t.open("far")).listLeases(), Error, "HTTP 401");
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: peers by list+watch, malformed annotations skipped, re-list on 410 Gone", async () => {
  const t = await setup();
  const ann = (ip: string, mac: string) => ({
    "flannel.alpha.coreos.com/public-ip": ip,
    "flannel.alpha.coreos.com/backend-type": "vxlan",
    "flannel.alpha.coreos.com/backend-data": JSON.stringify({ VNI: 1, VtepMAC: mac }),
    "flannel.alpha.coreos.com/kube-subnet-manager": "true",
  });
  const s = await t.open("n1");
  const ac = new AbortController();
  let it: AsyncIterator<LeaseEvent[]> | null = null;
  try {
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24" }, ann("192.0.2.1", "0e:00:00:00:00:01"));
    t.api.upsert("plain", { podCIDR: "10.244.9.0/24" }); // no flannel annotations: not a peer
    const { leases, cursor } = await s.listLeases();
    assertEquals(leases.map((l) => String(l.subnet)), ["10.244.1.0/24"]);
    it = s.watchLeases(cursor, ac.signal)[Symbol.asyncIterator]();
    t.api.upsert("n2", { podCIDR: "10.244.2.0/24" }, ann("192.0.2.2", "0e:00:00:00:00:02"));
    t.api.upsert("bad", { podCIDR: "10.244.3.0/24" }, {
      ...ann("192.0.2.3", "x"),
      "flannel.alpha.coreos.com/backend-data": "{nope",
    });
    let evs = await nextEvents(it, (e) => e.some((x) => x.type === "added"));
    assertEquals(evs.map((e) => [e.type, String(e.lease.subnet), e.lease.attrs.PublicIP]), [
      ["added", "10.244.2.0/24", "192.0.2.2"],
    ]);
    t.api.remove("n2");
    evs = await nextEvents(it, (e) => e.some((x) => x.type === "removed"));
    assertEquals(evs.map((e) => [e.type, String(e.lease.subnet)]), [["removed", "10.244.2.0/24"]]);
    // History compacted while changes happen: the watch gets 410 and the store re-lists and diffs.
    t.api.hold = true;
    t.api.compact(); // closes the open watch; the reconnect is held
    t.api.upsert("n4", { podCIDR: "10.244.4.0/24" }, ann("192.0.2.4", "0e:00:00:00:00:04"));
    t.api.remove("n1");
    t.api.compact();
    t.api.release();
    evs = await nextEvents(it, (e) => e.length >= 2);
    assertEquals(t.api.goneSent, 1, "the watch was answered 410 Gone");
    assertEquals(evs.map((e) => [e.type, String(e.lease.subnet)]).sort(), [
      ["added", "10.244.4.0/24"],
      ["removed", "10.244.1.0/24"],
    ]);
    const cli = await leaseCli([
      "list",
      "-o",
      "json",
      "--kube-subnet-mgr",
      "--kubeconfig-file",
      `${t.dir}/kubeconfig`,
      "--net-config-path",
      `${t.dir}/net-conf.json`,
    ]);
    assertEquals(cli.code, 0, cli.stderr);
    assertEquals(JSON.parse(cli.stdout), [{
      subnet: "10.244.4.0/24",
      publicIP: "192.0.2.4",
      backendType: "vxlan",
      backendData: { VNI: 1, VtepMAC: "0e:00:00:00:00:04" },
      expiration: null,
    }]);
    assertStringIncludes(cli.stderr, "node bad");
  } finally {
    ac.abort();
    await it?.return?.();
    await s.close();
    await t.cleanup();
  }
});

Deno.test("kube store: dual stack from spec.podCIDRs, public-ipv6 and backend-v6-data annotations", async () => {
  const t = await setup();
  try {
    await Deno.writeTextFile(
      `${t.dir}/net-conf.json`,
      JSON.stringify({
        Network: "10.244.0.0/16",
        EnableIPv6: true,
        IPv6Network: "fc00::/48",
        Backend: { Type: "vxlan" },
      }),
    );
    const v6Data = { VNI: 1, VtepMAC: "0e:bb:00:00:00:01" };
    const dual = { ...attrs, PublicIPv6: "fc00:99::1", BackendV6Data: v6Data };
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24", "fc00:0:0:1::/64"] });
    t.api.upsert("v4only", { podCIDR: "10.244.2.0/24", podCIDRs: ["10.244.2.0/24"] });
    t.api.upsert("far6", { podCIDR: "10.244.3.0/24", podCIDRs: ["10.244.3.0/24", "fd00:1::/64"] });
    const s = await t.open("n1");
    const l = await s.acquireLease(dual);
    assertEquals([String(l.subnet), String(l.ipv6Subnet)], ["10.244.1.0/24", "fc00:0:0:1::/64"]);
    assertEquals(t.api.nodes.get("n1")!.metadata.annotations, {
      "flannel.alpha.coreos.com/backend-type": "vxlan",
      "flannel.alpha.coreos.com/kube-subnet-manager": "true",
      "flannel.alpha.coreos.com/backend-data": `{"VNI":1,"VtepMAC":"0e:aa:00:00:00:01"}`,
      "flannel.alpha.coreos.com/public-ip": "192.0.2.1",
      "flannel.alpha.coreos.com/backend-v6-data": `{"VNI":1,"VtepMAC":"0e:bb:00:00:00:01"}`,
      "flannel.alpha.coreos.com/public-ipv6": "fc00:99::1",
    });
    // The peer view of the node has both families and both data fields.
    const { leases } = await s.listLeases();
    const me = leases.find((x) => x.attrs.PublicIP === "192.0.2.1")!;
    assertEquals([String(me.ipv6Subnet), me.attrs.PublicIPv6, me.attrs.BackendV6Data], [
      "fc00:0:0:1::/64",
      "fc00:99::1",
      v6Data,
    ]);
    await s.close();
    // A node without an IPv6 pod cidr, and one outside IPv6Network.
    await assertRejects(
      async () => (await t.open("v4only")).acquireLease(dual),
      PodCidrNotAssignedError,
      "pod cidr not assigned",
    );
    await assertRejects(
      async () => (await t.open("far6")).acquireLease(dual),
      Error,
      "is not inside IPv6Network fc00::/48",
    );
  } finally {
    await t.cleanup();
  }
});
