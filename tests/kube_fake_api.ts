/**
 * An in-test fake Kubernetes API server (Deno.serve) that follows the API's semantics for what the kube store
 * uses: a global resourceVersion, LIST with metadata.resourceVersion, WATCH as a stream of JSON lines from a
 * resourceVersion (410 Gone as an ERROR event when it is older than the retained history), merge-patch /
 * strategic-merge-patch content types (415 otherwise), 409 on a stale metadata.resourceVersion
 * precondition, bearer-token auth (401), and GET of pods (for the node-name lookup) and of ConfigMaps. With `netns` it
 * listens inside that (test-made) namespace, so daemons in the test's namespaces reach it.
 * @module
 */
import { inNetns } from "../lib/sys/netns.ts";

/** A JSON object. */
export type Json = Record<string, unknown>;
/** A Node object as the fake server keeps it. */
export interface Node {
  metadata: {
    name: string;
    resourceVersion: string;
    creationTimestamp?: string;
    annotations: Record<string, string>;
  };
  spec: { podCIDR?: string; podCIDRs?: string[] };
  status: { conditions: Json[] };
}

/** The token the server accepts at first. */
export const TOKEN = "s3cret-token";

/** A kubeconfig (YAML) whose current context reaches the fake API server at `url` with {@link TOKEN}. */
export function kubeconfigYaml(url: string): string {
  return `apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {server: "${url}"}\n` +
    `contexts:\n- name: c\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: ${TOKEN}}\n`;
}

/** The fake API server. */
export class FakeApiServer {
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
  /** The query string of every list (not watch) request, in order. */
  listQueries: string[] = [];
  /** The query string of every watch request, in order. */
  watchQueries: string[] = [];
  /** Every request: method, path with query, User-Agent, time (ms since the epoch). */
  requests: { method: string; url: string; ua: string; at: number }[] = [];
  /**
   * As the apiserver's watch cache (on by default): a list with `resourceVersion=0` (or another non-empty
   * one without `continue`) is answered whole, whatever its `limit`; a list without resourceVersion is a
   * consistent read, paged by `limit`. Off: every list is paged (as with the watch cache disabled).
   */
  watchCache = true;
  /** Answers a request instead of the server when it returns a Response (a hostile server's faults). */
  intercept: ((req: Request, u: URL) => Response | null | Promise<Response | null>) | null = null;
  /** The bearer token accepted (rotate it to test re-reading the token file). */
  token = TOKEN;
  /** Pods by "namespace/name" (for the node-name lookup). */
  pods = new Map<string, { spec: { nodeName?: string } }>();
  /** ConfigMaps by "namespace/name" (doctor reads kube-flannel-cfg's net-conf.json). */
  configMaps = new Map<string, { data: Record<string, string> }>();
  /** Authorization headers seen. */
  auths: string[] = [];
  #held: (() => void)[] = [];
  #watchers = new Set<ReadableStreamDefaultController<Uint8Array>>();
  #server: Deno.HttpServer<Deno.NetAddr>;
  url: string;

  /** Called (and awaited before answering) for each patch of a node's status conditions. */
  onConditionPatch: ((node: string) => Promise<void>) | null = null;

  constructor(opts: { hostname?: string; netns?: string } = {}) {
    const hostname = opts.hostname ?? "127.0.0.1";
    const serve = () => Deno.serve({ hostname, port: 0, onListen: () => {} }, (r) => this.#handle(r));
    // Deno.serve binds synchronously: inside inNetns the listening socket belongs to that namespace.
    this.#server = opts.netns ? inNetns({ name: opts.netns }, serve) : serve();
    this.url = `http://${hostname}:${this.#server.addr.port}`;
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

  /** Creates or replaces a Node; a new one is created now (`created`: another creationTimestamp). */
  upsert(name: string, spec: Node["spec"], annotations: Record<string, string> = {}, created?: string) {
    const existed = this.nodes.get(name);
    const creationTimestamp = created ?? existed?.metadata.creationTimestamp ?? new Date().toISOString();
    const n: Node = {
      metadata: { name, resourceVersion: String(++this.rv), creationTimestamp, annotations },
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

  /** Response body bytes sent (watch streams counted as they flow). */
  bytesSent = 0;

  async #handle(req: Request): Promise<Response> {
    const r = await this.#route(req);
    if (!r.body) return r;
    const count = new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, c) => {
        this.bytesSent += chunk.length;
        c.enqueue(chunk);
      },
    });
    return new Response(r.body.pipeThrough(count), { status: r.status, headers: r.headers });
  }

  async #route(req: Request): Promise<Response> {
    const url = new URL(req.url);
    this.requests.push({
      method: req.method,
      url: url.pathname + url.search,
      ua: req.headers.get("user-agent") ?? "",
      at: Date.now(),
    });
    if (this.intercept) {
      const r = await this.intercept(req, url);
      if (r) return r;
    }
    this.auths.push(req.headers.get("authorization") ?? "");
    if (req.headers.get("authorization") !== `Bearer ${this.token}`) {
      return this.#status(401, "Unauthorized", "bad token");
    }
    const u = new URL(req.url);
    const pod = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/.exec(u.pathname);
    if (pod && req.method === "GET") {
      const p = this.pods.get(`${decodeURIComponent(pod[1])}/${decodeURIComponent(pod[2])}`);
      return p ? Response.json(p) : this.#status(404, "NotFound", `pods "${pod[2]}" not found`);
    }
    const cm = /^\/api\/v1\/namespaces\/([^/]+)\/configmaps\/([^/]+)$/.exec(u.pathname);
    if (cm && req.method === "GET") {
      const c = this.configMaps.get(`${decodeURIComponent(cm[1])}/${decodeURIComponent(cm[2])}`);
      return c
        ? Response.json({ kind: "ConfigMap", apiVersion: "v1", ...c })
        : this.#status(404, "NotFound", `configmaps "${cm[2]}" not found`);
    }
    const m = /^\/api\/v1\/nodes(?:\/([^/]+))?(\/status)?$/.exec(u.pathname);
    if (!m) return this.#status(404, "NotFound", `no route ${u.pathname}`);
    const [, name, status] = m;
    const watch = u.searchParams.get("watch");
    if (!name && req.method === "GET" && (watch === "1" || watch === "true")) {
      this.watchQueries.push(u.search);
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
      this.listQueries.push(u.search);
      // `limit`/`continue` as the real API server: the token names the list's resourceVersion and the last
      // name sent; pages follow name order; the last page has no `continue`.
      const token = u.searchParams.get("continue");
      const reqRv = u.searchParams.get("resourceVersion");
      if (token && reqRv !== null) {
        return this.#status(
          400,
          "BadRequest",
          "specifying resource version is not allowed when using continue",
        );
      }
      // The watch cache serves a list with a resourceVersion whole (it ignores limit).
      const fromCache = this.watchCache && !token && reqRv !== null && reqRv !== "";
      const limit = fromCache ? 0 : Number(u.searchParams.get("limit") ?? 0);
      let rv = String(this.rv), after = "";
      if (token) {
        try {
          [rv, after] = JSON.parse(atob(token)) as [string, string];
        } catch {
          return this.#status(400, "BadRequest", "invalid continue token");
        }
      }
      let items = [...this.nodes.values()];
      if (limit > 0 || token) {
        items = items.filter((n) => n.metadata.name > after).sort((a, b) =>
          a.metadata.name < b.metadata.name ? -1 : 1
        );
      }
      const more = limit > 0 && items.length > limit;
      if (limit > 0) items = items.slice(0, limit);
      const md: Record<string, string> = { resourceVersion: rv };
      if (more) md.continue = btoa(JSON.stringify([rv, items[items.length - 1].metadata.name]));
      return Response.json({ kind: "NodeList", metadata: md, items });
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
    const conds = ((body.status as Json)?.conditions ?? []) as Json[];
    if (conds.length && this.onConditionPatch) await this.onConditionPatch(node.metadata.name);
    for (const c of conds) {
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
