/**
 * The projection of a Kubernetes Node onto what the kube store needs, and the paginated Node list.
 *
 * A real Node is ~10 KB of JSON (labels, images, conditions, addresses); the store needs its name,
 * resourceVersion, podCIDR(s) and the annotations under the flannel prefix. Each Node is projected as soon
 * as it is decoded, so the rest is garbage at once, and the list is read item by item from the stream.
 *
 * The list follows client-go's reflector (what flanneld's informer does): the first list asks the watch cache
 * (`limit=500&resourceVersion=0`); a re-list asks for at least the last resourceVersion seen
 * (`resourceVersion=<rv>`, no limit, so the watch cache serves it: with a limit the apiserver would read etcd),
 * with `limit=500` when the server paged before; `continue` pages drop the resourceVersion as client-go's
 * pager does. When that fails with 410 Gone (as client-go), or the one response is larger than the body cap
 * (ours: a cluster beyond the cap's 5000-Node sizing), it falls back to a consistent list in pages of 500.
 * @module
 */

import { KubeApiError, type KubeClient } from "./kube_client.ts";
import { ResponseTooLargeError } from "../limits.ts";
import { isObj } from "../../base/json.ts";

/**
 * Nodes per list page: client-go's pager's (and so flanneld's informer's) 500. With `resourceVersion=0` the
 * apiserver's watch cache answers with the whole list whatever the limit; a consistent list (no
 * resourceVersion, the fallback) comes in pages of 500 from etcd. Either way the response is read item by
 * item (lib/store/json_list.ts) and each Node projected at once, so the page size no longer sets the peak
 * memory (it did when each page was parsed whole, which is why pages were smaller before).
 */
export const LIST_PAGE_SIZE = 500;

/**
 * A list calls its release hook (the daemon: a full GC, malloc_trim) after every this many Nodes: each Node
 * is parsed whole and is garbage at once, and what the young generation promotes of it would otherwise pile
 * up in the old generation until the list ends (measured: docs/performance.md, "Kube mode on the real API
 * server").
 */
export const LIST_RELEASE_EVERY = 1000;

/** The Node fields the store reads. */
export interface KubeNode {
  metadata: {
    name: string;
    resourceVersion?: string;
    /** RFC 3339, as the API server sets it: the lease's age when two Nodes claim one subnet. */
    creationTimestamp?: string;
    annotations?: Record<string, string>;
  };
  spec?: { podCIDR?: string; podCIDRs?: string[] };
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => isObj(v) ? v : undefined;
const str = (v: unknown): string | undefined => typeof v === "string" ? v : undefined;

/**
 * Keeps only the fields the store needs of a decoded Node: name, resourceVersion, spec.podCIDR(s) and the
 * annotations whose key starts with `prefix` (the normalized annotation prefix).
 */
export function projectNode(raw: unknown, prefix: string): KubeNode {
  const n = obj(raw) ?? {};
  const md = obj(n.metadata) ?? {};
  const spec = obj(n.spec);
  const out: KubeNode = { metadata: { name: str(md.name) ?? "" } };
  const rv = str(md.resourceVersion);
  if (rv !== undefined) out.metadata.resourceVersion = rv;
  const created = str(md.creationTimestamp);
  if (created !== undefined && created.length <= 64) out.metadata.creationTimestamp = created;
  const ann = obj(md.annotations);
  if (ann) {
    const kept: Record<string, string> = {};
    let any = false;
    for (const k of Object.keys(ann)) {
      const v = ann[k];
      if (k.startsWith(prefix) && typeof v === "string") {
        kept[k] = v;
        any = true;
      }
    }
    if (any) out.metadata.annotations = kept;
  }
  if (spec) {
    const s: NonNullable<KubeNode["spec"]> = {};
    const one = str(spec.podCIDR);
    if (one !== undefined) s.podCIDR = one;
    if (Array.isArray(spec.podCIDRs)) {
      s.podCIDRs = spec.podCIDRs.filter((c) => typeof c === "string");
    }
    out.spec = s;
  }
  return out;
}

/** Where a list starts: the last resourceVersion seen (none: the first list) and whether the server paged. */
export interface ListFrom {
  rv?: string;
  paginated?: boolean;
}

/** One list's result: the projected Nodes, the list's resourceVersion, whether the server paged it. */
export interface NodeList {
  nodes: KubeNode[];
  rv: string;
  paginated: boolean;
  /** Requests the list took. */
  requests: number;
}

/** The bytes a projected Node keeps (its strings), for the kept-data cap. */
function keptBytes(n: KubeNode): number {
  let b = 64 + n.metadata.name.length + (n.metadata.resourceVersion?.length ?? 0);
  for (const [k, v] of Object.entries(n.metadata.annotations ?? {})) b += k.length + v.length;
  b += n.spec?.podCIDR?.length ?? 0;
  for (const c of n.spec?.podCIDRs ?? []) b += c.length;
  return b;
}

async function listOnce(
  client: Pick<KubeClient, "list" | "limits">,
  prefix: string,
  firstQuery: string,
  pageSize: number,
  release?: () => void,
): Promise<NodeList> {
  const lim = client.limits;
  const nodes: KubeNode[] = [];
  let rv = "", token = "", q = firstQuery, pages = 0, kept = 0;
  const onItem = (item: unknown) => {
    const n = projectNode(item, prefix);
    kept += keptBytes(n);
    if (kept > lim.maxKeptBytes) {
      throw new ResponseTooLargeError(
        `Kubernetes node list: more than ${lim.maxKeptBytes} bytes of node data to keep (refused)`,
        "kept",
      );
    }
    if (nodes.length >= lim.maxItems) {
      throw new ResponseTooLargeError(
        `Kubernetes node list: more than ${lim.maxItems} Nodes (refused; FLANCTL_API_MAX_ITEMS raises the cap)`,
        "items",
      );
    }
    nodes.push(n);
    if (release && nodes.length % LIST_RELEASE_EVERY === 0) release();
  };
  for (;;) {
    if (++pages > lim.maxPages) {
      throw new ResponseTooLargeError(
        `Kubernetes node list: more than ${lim.maxPages} pages (refused; FLANCTL_API_MAX_PAGES raises the cap)`,
        "pages",
      );
    }
    const top = await client.list(`/api/v1/nodes?${q}`, onItem);
    const md = obj(top.metadata) ?? {};
    if (!rv) rv = str(md.resourceVersion) ?? "";
    token = str(md.continue) ?? "";
    if (!token) return { nodes, rv, paginated: pages > 1, requests: pages };
    // client-go's pager: the continue token carries the resourceVersion; sending one too is refused.
    q = `continue=${encodeURIComponent(token)}&limit=${pageSize}`;
  }
}

/**
 * One list of every Node (see the module doc for the queries), projected with `prefix`; `release` runs after
 * every {@link LIST_RELEASE_EVERY} Nodes (it must not throw). Throws
 * {@link ResponseTooLargeError} when a cap is broken, a KubeApiError when the server refuses.
 */
export async function listNodesPaged(
  client: Pick<KubeClient, "list" | "limits">,
  prefix: string,
  from: ListFrom = {},
  pageSize = LIST_PAGE_SIZE,
  release?: () => void,
): Promise<NodeList> {
  const rv = from.rv || "0";
  const first = rv === "0" || from.paginated
    ? `limit=${pageSize}&resourceVersion=${encodeURIComponent(rv)}`
    : `resourceVersion=${encodeURIComponent(rv)}`;
  try {
    return await listOnce(client, prefix, first, pageSize, release);
  } catch (e) {
    const gone = e instanceof KubeApiError && e.status === 410;
    const tooLarge = e instanceof ResponseTooLargeError && e.cap === "body";
    if (!gone && !tooLarge) throw e;
    const l = await listOnce(client, prefix, `limit=${pageSize}`, pageSize, release);
    return { ...l, requests: l.requests + 1 };
  }
}
