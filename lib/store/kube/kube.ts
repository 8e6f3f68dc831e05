/**
 * The Kubernetes store (`--kube-subnet-mgr`), as flannel's kube subnet manager: the node's subnet is its
 * `spec.podCIDR(s)` (assigned by kube-controller-manager), the config is the net-conf.json file from the
 * kube-flannel ConfigMap (`--net-config-path`), our lease is published as `<--kube-annotation-prefix>/*`
 * annotations on our Node (strategic merge patch on the status subresource, which is what flannel's RBAC
 * allows, with a resourceVersion precondition retried on 409), the Node's `NetworkUnavailable` condition
 * is set to False/FlannelIsUp (same subresource) by {@link KubeStore.completeLease} once the data plane
 * is up, and peers come from list+watch of Nodes, re-listing on 410 Gone. Our node's name: env NODE_NAME,
 * else the pod POD_NAMESPACE/POD_NAME's spec.nodeName, else --node-name (flanneld's order, plus the flag).
 * @module
 */
import { plainWarn, type Warn, warnOnce } from "../../base/warn.ts";
import type { NetConfig } from "../../config/types.ts";
import { parseNetConfig } from "../../config/netconf.ts";
import { ConfigError } from "../../config/netconf.ts";
import { IPNet } from "../../base/cidr.ts";
import {
  encodeLeaseAttrs,
  MalformedLeaseError,
  validateLeaseAttrs,
  warnMalformed,
} from "../../lease/wire.ts";
import type { Lease, LeaseAttrsWire, LeaseEvent, SubnetStore } from "../types.ts";
import { LeaseNotFoundError, StoreError } from "../errors.ts";
import {
  inClusterConnection,
  KubeApiError,
  KubeClient,
  type KubeConnection,
  loadKubeconfig,
} from "./kube_client.ts";
import { Backoff, DEFAULT_LEASE_TTL_MS, diffLeases } from "../util.ts";
import { errText, UsageError } from "../../base/errors.ts";
import { readCappedTextAsync } from "../../base/capped_read.ts";
import { type KubeNode, listNodesPaged, projectNode } from "./kube_node.ts";

/** Annotation prefix flannel uses on Node objects (the default of --kube-annotation-prefix, normalized). */
export const ANNOTATION_PREFIX = "flannel.alpha.coreos.com/";

/**
 * Normalizes `--kube-annotation-prefix` as flanneld (pkg/subnet/kube/annotations.go): at most one `/`; none
 * → `/` appended; not ending in `/` or `-` → `-` appended; then it must look like `fqdn/[a-z0-9_-]*`.
 * Throws {@link UsageError} naming the flag.
 */
export function annotationPrefix(raw: string): string {
  let p = raw;
  const slashes = p.split("/").length - 1;
  if (slashes > 1) {
    throw new UsageError(
      `--kube-annotation-prefix: '${raw}' has more than one '/'; use e.g. flannel.alpha.coreos.com`,
    );
  }
  if (slashes === 0) p += "/";
  if (!p.endsWith("/") && !p.endsWith("-")) p += "-";
  if (!/(?:[a-z0-9_-]+\.)+[a-z0-9_-]+\/(?:[a-z0-9_-]+-)?$/.test(p)) {
    throw new UsageError(
      `--kube-annotation-prefix: '${raw}' is not of the form fqdn[/name]; use e.g. flannel.alpha.coreos.com`,
    );
  }
  return p;
}

/** Options of the kube store. */
export interface KubeStoreOptions {
  /** API server URL (overrides the kubeconfig's server). */
  apiUrl?: string;
  /** kubeconfig path; without it the in-cluster service account is used. */
  kubeconfigFile?: string;
  /** `--node-name`: used when neither env NODE_NAME nor POD_NAMESPACE/POD_NAME name the node. */
  nodeName?: string;
  /** net-conf.json path. */
  netConfigPath: string;
  /** `--kube-annotation-prefix` as given (default flannel.alpha.coreos.com). */
  annotationPrefix?: string;
  /** Environment for NODE_NAME, POD_NAMESPACE, POD_NAME (default: the process's). */
  env?: Record<string, string | undefined>;
  /** Receives warnings (malformed node annotations, watch errors); default: plain lines on stderr. */
  warn?: Warn;
}

/** The node has no podCIDR yet (flannel's "pod cidr not assigned"). */
export class PodCidrNotAssignedError extends StoreError {
  constructor(node: string) {
    super(
      `node "${node}" pod cidr not assigned: start kube-controller-manager with --allocate-node-cidrs ` +
        `and --cluster-cidr, or set spec.podCIDR on the node`,
    );
  }
}

export type { KubeNode } from "./kube_node.ts";

/** Opens the kube store from a kubeconfig file or the in-cluster service account. */
export async function openKubeStore(o: KubeStoreOptions): Promise<KubeStore> {
  annotationPrefix(o.annotationPrefix ?? ANNOTATION_PREFIX); // bad prefix: a usage error before any request
  let conn: KubeConnection;
  if (o.kubeconfigFile) conn = await loadKubeconfig(o.kubeconfigFile);
  else if (o.apiUrl) conn = { server: o.apiUrl.replace(/\/$/, ""), source: "--kube-api-url" };
  else conn = inClusterConnection();
  if (o.apiUrl) conn = { ...conn, server: o.apiUrl.replace(/\/$/, "") };
  return new KubeStore(new KubeClient(conn), o);
}

function podCidrs(n: KubeNode): IPNet[] {
  const list = n.spec?.podCIDRs?.length ? n.spec.podCIDRs : n.spec?.podCIDR ? [n.spec.podCIDR] : [];
  return list.map((c) => IPNet.tryParse(c)).filter((x): x is IPNet => x !== null);
}

/**
 * The lease a Node publishes, or null when the node does not run flannel/flanctl: as flanneld
 * (handleAddLeaseEvent), only a Node annotated `<prefix>kube-subnet-manager: "true"` counts; it also needs a
 * public-ip annotation and a podCIDR. As flanneld, a peer's endpoint is its `public-ip` annotation only (a node's
 * `public-ip-overwrite` is already published there by that node). Throws {@link MalformedLeaseError} for
 * unparsable annotations. `prefix` is the normalized annotation prefix.
 */
export function leaseFromNode(n: KubeNode, prefix = ANNOTATION_PREFIX): Lease | null {
  const a = n.metadata.annotations ?? {};
  const get = (k: string) => a[prefix + k];
  if (get("kube-subnet-manager") !== "true") return null;
  const pub = get("public-ip") || undefined;
  const pub6 = get("public-ipv6") || undefined;
  const cidrs = podCidrs(n);
  if ((!pub && !pub6) || cidrs.length === 0) return null;
  const key = `node ${n.metadata.name}`;
  const json = (k: string) => {
    const v = get(k);
    if (v === undefined || v === "") return undefined;
    try {
      return JSON.parse(v) as unknown;
    } catch {
      throw new MalformedLeaseError(key, `annotation ${prefix}${k} is not JSON: ${v}`);
    }
  };
  const attrs = validateLeaseAttrs(key, {
    PublicIP: pub ?? "0.0.0.0",
    PublicIPv6: pub6 ?? null,
    BackendType: get("backend-type") ?? "",
    BackendData: json("backend-data"),
    BackendV6Data: json("backend-v6-data"),
  });
  return {
    subnet: cidrs.find((c) => c.family === 4) ?? null,
    ipv6Subnet: cidrs.find((c) => c.family === 6) ?? null,
    attrs,
    expiration: null,
    revision: n.metadata.resourceVersion,
    created: createdMs(n),
    node: n.metadata.name,
  };
}

/** The Node's creationTimestamp in ms since the epoch, or undefined when it has none (or not a date). */
function createdMs(n: KubeNode): number | undefined {
  const t = n.metadata.creationTimestamp ? Date.parse(n.metadata.creationTimestamp) : NaN;
  return Number.isFinite(t) ? t : undefined;
}

/** The kube store. */
export class KubeStore implements SubnetStore {
  /** Always "kube". */
  readonly kind = "kube";
  /** The API client. */
  readonly client: KubeClient;
  #opts: KubeStoreOptions;
  #closed = new AbortController();
  #snapshots = new Map<string, Map<string, Lease>>();
  #warned = new Set<string>();

  /** Normalized annotation prefix (`flannel.alpha.coreos.com/`). */
  readonly prefix: string;
  #nodeName: string | null = null;
  /** net-conf warnings, each once (the config is re-read often). */
  #configWarn: Warn | null;

  constructor(client: KubeClient, opts: KubeStoreOptions) {
    this.client = client;
    this.#opts = opts;
    this.prefix = annotationPrefix(opts.annotationPrefix ?? ANNOTATION_PREFIX);
    this.#configWarn = opts.warn ? warnOnce(opts.warn) : null;
  }

  /**
   * Our node's name, as flanneld finds it: env NODE_NAME, else the `spec.nodeName` of the pod
   * POD_NAMESPACE/POD_NAME (what the kube-flannel DaemonSet sets), else `--node-name`.
   */
  async nodeName(): Promise<string> {
    if (this.#nodeName) return this.#nodeName;
    const env = this.#opts.env ?? Deno.env.toObject();
    let name = env.NODE_NAME || null;
    let podError = "";
    if (!name && env.POD_NAMESPACE && env.POD_NAME) {
      const path = `/api/v1/namespaces/${encodeURIComponent(env.POD_NAMESPACE)}/pods/${
        encodeURIComponent(env.POD_NAME)
      }`;
      try {
        const pod = await this.client.request<{ spec?: { nodeName?: string } }>("GET", path);
        name = pod.spec?.nodeName || null;
        if (!name) podError = ` (pod ${env.POD_NAMESPACE}/${env.POD_NAME} has no spec.nodeName yet)`;
      } catch (e) {
        if (!(e instanceof KubeApiError)) throw e;
        podError = ` (pod ${env.POD_NAMESPACE}/${env.POD_NAME}: ${e.message})`;
      }
    }
    name ??= this.#opts.nodeName || null;
    if (!name) {
      throw new StoreError(
        `cannot tell this node's name: set env NODE_NAME, or env POD_NAMESPACE and POD_NAME (the pod's ` +
          `spec.nodeName is used; the kube-flannel DaemonSet sets them from the downward API), or pass ` +
          `--node-name${podError}`,
      );
    }
    this.#nodeName = name;
    return name;
  }

  #nodePath(name: string) {
    return `/api/v1/nodes/${encodeURIComponent(name)}`;
  }

  /** Reads `--net-config-path`. */
  async getNetworkConfig(): Promise<NetConfig> {
    let text: string;
    try {
      text = await readCappedTextAsync(this.#opts.netConfigPath);
    } catch (e) {
      throw new ConfigError(
        "net-config-path",
        `--net-config-path: cannot read ${this.#opts.netConfigPath}: ${
          errText(e)
        } (mount the kube-flannel ConfigMap there)`,
      );
    }
    return parseNetConfig(text, this.#configWarn ? { warn: this.#configWarn } : {});
  }

  /** Not supported: in kube mode the config is the ConfigMap file. */
  setNetworkConfig(_json: string): Promise<void> {
    return Promise.reject(
      new StoreError(
        `with --kube-subnet-mgr the network config is ${this.#opts.netConfigPath} (the kube-flannel ConfigMap): ` +
          `edit the ConfigMap instead`,
      ),
    );
  }

  #toLease(n: KubeNode): Lease | null {
    try {
      return leaseFromNode(n, this.prefix);
    } catch (e) {
      const id = `${n.metadata.name}@${n.metadata.resourceVersion}`;
      if (!this.#warned.has(id)) warnMalformed(e, "kube", this.#opts.warn);
      this.#warned.add(id);
      return null;
    }
  }

  /**
   * Takes the node's podCIDR(s) as the lease and publishes `attrs` as annotations. As flanneld, a
   * `public-ip-overwrite` (`public-ipv6-overwrite`) annotation on our node is what gets published as
   * `public-ip`. NetworkUnavailable is not touched here: see {@link completeLease}.
   */
  async acquireLease(attrs: LeaseAttrsWire): Promise<Lease> {
    const cfg = await this.getNetworkConfig();
    const name = await this.nodeName();
    const P = this.prefix;
    for (let attempt = 0;; attempt++) {
      const node = await this.#getNode(name);
      const cidrs = podCidrs(node);
      const v4 = cidrs.find((c) => c.family === 4) ?? null;
      const v6 = cidrs.find((c) => c.family === 6) ?? null;
      if ((cfg.enableIPv4 && !v4) || (cfg.enableIPv6 && !v6)) throw new PodCidrNotAssignedError(name);
      if (cfg.enableIPv4 && !cfg.network!.contains(v4!)) {
        throw new StoreError(
          `node "${name}" pod cidr ${v4} is not inside Network ${cfg.network}: make kube-controller-manager's ` +
            `--cluster-cidr match net-conf.json`,
        );
      }
      if (cfg.enableIPv6 && !cfg.ipv6Network!.contains(v6!)) {
        throw new StoreError(
          `node "${name}" IPv6 pod cidr ${v6} is not inside IPv6Network ${cfg.ipv6Network}`,
        );
      }
      const have = node.metadata.annotations ?? {};
      const published: LeaseAttrsWire = {
        ...attrs,
        PublicIP: have[`${P}public-ip-overwrite`] || attrs.PublicIP,
        PublicIPv6: (cfg.enableIPv6 ? have[`${P}public-ipv6-overwrite`] : "") || attrs.PublicIPv6,
      };
      const want: Record<string, string> = {
        [`${P}backend-type`]: attrs.BackendType,
        [`${P}kube-subnet-manager`]: "true",
      };
      // As flanneld's AcquireLease: a vxlan node writes backend-data/public-ip only with IPv4; any other
      // backend writes them always, so an IPv6-only host-gw node publishes backend-data "null" and
      // public-ip "0.0.0.0".
      if (cfg.enableIPv4 || attrs.BackendType !== "vxlan") {
        want[`${P}backend-data`] = JSON.stringify(attrs.BackendData ?? null);
        want[`${P}public-ip`] = published.PublicIP;
      }
      if (cfg.enableIPv6) {
        want[`${P}backend-v6-data`] = JSON.stringify(attrs.BackendV6Data ?? null);
        want[`${P}public-ipv6`] = published.PublicIPv6 ?? "";
      }
      let rv = node.metadata.resourceVersion;
      if (Object.entries(want).some(([k, v]) => have[k] !== v)) {
        try {
          // Through the status subresource, as flannel: kube-flannel's ClusterRole grants `patch` on
          // nodes/status only. The resourceVersion makes it conditional (409 when the node changed).
          const patched = await this.client.request<KubeNode>(
            "PATCH",
            `${this.#nodePath(name)}/status`,
            { metadata: { resourceVersion: node.metadata.resourceVersion, annotations: want } },
            "application/strategic-merge-patch+json",
          );
          rv = patched.metadata.resourceVersion;
        } catch (e) {
          if (e instanceof KubeApiError && e.status === 409 && attempt < 5) continue; // node changed: re-read
          throw e;
        }
      }
      return {
        subnet: v4,
        ipv6Subnet: v6,
        attrs: published,
        expiration: new Date(Date.now() + DEFAULT_LEASE_TTL_MS),
        revision: rv,
        created: createdMs(node),
        node: name,
      };
    }
  }

  /**
   * Patches our annotations back after another writer changed them (see {@link SubnetStore.reclaimLease}):
   * {@link acquireLease} with what we published, conditional on the Node's resourceVersion.
   */
  async reclaimLease(lease: Lease): Promise<Lease> {
    return { ...(await this.acquireLease(lease.attrs)), expiration: lease.expiration };
  }

  /** Our node's `node-public-ip`/`node-public-ipv6` annotations (they act as --public-ip/--public-ipv6). */
  async storedPublicIP(): Promise<{ publicIP: string | null; publicIPv6: string | null }> {
    const a = (await this.#getNode(await this.nodeName())).metadata.annotations ?? {};
    return {
      publicIP: a[`${this.prefix}node-public-ip`] || null,
      publicIPv6: a[`${this.prefix}node-public-ipv6`] || null,
    };
  }

  /**
   * Our node's published `backend-data` (family 6: `backend-v6-data`), parsed; null when absent or not JSON.
   */
  async storedBackendData(family: 4 | 6 = 4): Promise<unknown> {
    const a = (await this.#getNode(await this.nodeName())).metadata.annotations ?? {};
    try {
      return JSON.parse(a[`${this.prefix}${family === 6 ? "backend-v6-data" : "backend-data"}`] ?? "null");
    } catch {
      return null;
    }
  }

  /**
   * Sets our node's NetworkUnavailable condition to False (reason FlannelIsUp), as flanneld's CompleteLease:
   * the daemon calls it only once the backend device, subnet.env and the rules are in place (and not with
   * --set-node-network-unavailable=false).
   */
  async completeLease(): Promise<void> {
    await this.#setNetworkAvailable(await this.nodeName());
  }

  async #getNode(name: string): Promise<KubeNode> {
    try {
      return await this.client.request<KubeNode>("GET", this.#nodePath(name));
    } catch (e) {
      if (e instanceof KubeApiError && e.status === 404) {
        throw new LeaseNotFoundError(
          `node "${name}" not found in the Kubernetes API (check NODE_NAME, POD_NAMESPACE/POD_NAME or --node-name)`,
        );
      }
      throw e;
    }
  }

  async #setNetworkAvailable(name: string): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    await this.client.request(
      "PATCH",
      `${this.#nodePath(name)}/status`,
      {
        status: {
          conditions: [{
            type: "NetworkUnavailable",
            status: "False",
            reason: "FlannelIsUp",
            message: "Flannel is running on this node",
            lastTransitionTime: now,
            lastHeartbeatTime: now,
          }],
        },
      },
      "application/strategic-merge-patch+json",
    );
  }

  /** Kube leases do not expire; renewal checks the node still holds the same podCIDR. */
  async renewLease(lease: Lease): Promise<Lease> {
    const name = await this.nodeName();
    const node = await this.#getNode(name);
    const cidrs = podCidrs(node);
    const same = (a: IPNet | null) => !a || cidrs.some((c) => c.equals(a));
    if (!same(lease.subnet) || !same(lease.ipv6Subnet)) {
      throw new LeaseNotFoundError(`node "${name}" pod cidr changed: acquire again`);
    }
    return {
      ...lease,
      expiration: new Date(Date.now() + DEFAULT_LEASE_TTL_MS),
      revision: node.metadata.resourceVersion,
    };
  }

  /** Not supported: podCIDRs are assigned by kube-controller-manager. */
  revokeLease(_subnet: IPNet): Promise<void> {
    return Promise.reject(
      new StoreError(
        "revoke is not supported with --kube-subnet-mgr: podCIDRs belong to kube-controller-manager",
      ),
    );
  }

  /** Not supported: podCIDRs are assigned by kube-controller-manager. */
  reserve(_subnet: IPNet, _publicIP: string, _v6?: unknown): Promise<void> {
    return Promise.reject(
      new StoreError("reserve is not supported with --kube-subnet-mgr: set the node's spec.podCIDR instead"),
    );
  }

  async #list(): Promise<{ leases: Map<string, Lease>; rv: string }> {
    const l = await listNodesPaged(this.client, this.prefix);
    const leases = new Map<string, Lease>();
    for (const n of l.nodes) {
      const lease = this.#toLease(n);
      if (lease) leases.set(n.metadata.name, lease);
    }
    return { leases, rv: l.rv };
  }

  /** Leases of every node that publishes one; the cursor is the list's resourceVersion. */
  async listLeases(): Promise<{ leases: Lease[]; cursor: string }> {
    const { leases, rv } = await this.#list();
    this.#snapshots.set(rv, leases);
    if (this.#snapshots.size > 8) this.#snapshots.delete(this.#snapshots.keys().next().value!);
    return { leases: [...leases.values()], cursor: rv };
  }

  /** Watches Nodes from `cursor`; re-lists and diffs on 410 Gone; reconnects with backoff. */
  async *watchLeases(cursor: string, signal: AbortSignal): AsyncIterable<LeaseEvent[]> {
    const stop = AbortSignal.any([signal, this.#closed.signal]);
    let rv = cursor;
    let known = new Map(this.#snapshots.get(cursor) ?? []);
    if (!this.#snapshots.has(cursor)) {
      const l = await this.#list();
      known = l.leases;
      if (!rv) rv = l.rv;
    }
    const backoff = new Backoff(this.#opts.warn);
    const same = (a: Lease, b: Lease) =>
      String(a.subnet) === String(b.subnet) && String(a.ipv6Subnet) === String(b.ipv6Subnet) &&
      encodeLeaseAttrs(a.attrs) === encodeLeaseAttrs(b.attrs);
    while (!stop.aborted) {
      let relist = false;
      try {
        const path = `/api/v1/nodes?watch=1&allowWatchBookmarks=true&resourceVersion=${
          encodeURIComponent(rv)
        }`;
        for await (const raw of this.client.watch<KubeNode & { code?: number }>(path, stop)) {
          backoff.reset();
          // Only the projected fields stay alive (the rest of a ~10 KB Node is garbage at once).
          const ev = raw.type === "ERROR"
            ? raw
            : { type: raw.type, object: projectNode(raw.object, this.prefix) };
          if (ev.type === "ERROR") {
            if (ev.object.code === 410) relist = true;
            else (this.#opts.warn ?? plainWarn)(`Kubernetes watch error: ${JSON.stringify(ev.object)}`);
            break;
          }
          rv = ev.object.metadata?.resourceVersion ?? rv;
          if (ev.type === "BOOKMARK") continue;
          const name = ev.object.metadata.name;
          const old = known.get(name);
          const cur = ev.type === "DELETED" ? null : this.#toLease(ev.object);
          const events: LeaseEvent[] = [];
          if (!cur) {
            if (old) {
              known.delete(name);
              events.push({ type: "removed", lease: old });
            }
          } else if (!old || !same(old, cur)) {
            if (old && (String(old.subnet) !== String(cur.subnet))) {
              events.push({ type: "removed", lease: old });
            }
            known.set(name, cur);
            events.push({ type: "added", lease: cur });
          } else known.set(name, cur);
          if (events.length) yield events;
        }
      } catch (e) {
        if (stop.aborted) break;
        if (e instanceof KubeApiError && e.status === 410) relist = true;
        else {
          await backoff.wait(`Kubernetes watch failed (${errText(e)})`, stop);
        }
      }
      if (stop.aborted) break;
      if (relist) {
        try {
          const l = await this.#list();
          const events = diffLeases(known, l.leases, same);
          known = l.leases;
          rv = l.rv;
          if (events.length) yield events;
        } catch (e) {
          if (stop.aborted) break;
          await backoff.wait(`Kubernetes re-list failed (${errText(e)})`, stop);
        }
      }
    }
  }

  /** Stops watchers and closes the client. */
  close(): Promise<void> {
    this.#closed.abort();
    this.client.close();
    return Promise.resolve();
  }
}
