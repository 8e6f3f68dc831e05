/**
 * The projection of a Kubernetes Node onto what the kube store needs, and the paginated Node list.
 *
 * A real Node is ~10 KB of JSON (labels, images, conditions, addresses); the store needs its name,
 * resourceVersion, podCIDR(s) and the annotations under the flannel prefix. Each Node is projected as soon
 * as it is decoded, so the rest is garbage at once; the list is read in pages of {@link LIST_PAGE_SIZE}
 * (`limit`/`continue`, as client-go's pager, with smaller pages) so at most one page of full Nodes is alive at a time.
 * @module
 */

import type { KubeClient } from "./kube_client.ts";

/**
 * Nodes per list page. client-go's pager uses 500; with ~10 KB Nodes a page's transient (body bytes, text,
 * parsed Nodes) sets the daemon's peak RSS during the list, while the steady RSS no longer depends on it (the
 * daemon gives it back: lib/daemon/memory.ts). 20 is 250 requests per 5000-Node list, on every node's start
 * and re-list; the peak and list time per page size: docs/performance.md, "Kube list page size".
 */
export const LIST_PAGE_SIZE = 20;

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
const obj = (v: unknown): Obj | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? v as Obj : undefined;
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

/** One list, read page by page: the projected Nodes and the list's resourceVersion. */
export async function listNodesPaged(
  client: Pick<KubeClient, "request">,
  prefix: string,
  pageSize = LIST_PAGE_SIZE,
): Promise<{ nodes: KubeNode[]; rv: string }> {
  const nodes: KubeNode[] = [];
  let rv = "";
  let token = "";
  do {
    const q = `limit=${pageSize}${token ? `&continue=${encodeURIComponent(token)}` : ""}`;
    const page = await client.request<Obj>("GET", `/api/v1/nodes?${q}`);
    const md = obj(page.metadata) ?? {};
    if (!rv) rv = str(md.resourceVersion) ?? "";
    for (const item of Array.isArray(page.items) ? page.items : []) nodes.push(projectNode(item, prefix));
    token = str(md.continue) ?? "";
  } while (token);
  return { nodes, rv };
}
