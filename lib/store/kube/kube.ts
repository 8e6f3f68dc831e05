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
import { sleep } from "../../base/sleep.ts";
import type { NetConfig } from "../../config/types.ts";
import { parseNetConfig } from "../../config/netconf.ts";
import { ConfigError } from "../../config/netconf.ts";
import { IPNet } from "../../base/cidr.ts";
import { isObj } from "../../base/json.ts";
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
  WatchTimeoutError,
} from "./kube_client.ts";
import { DEFAULT_LEASE_TTL_MS, diffLeases, WatchRetry } from "../util.ts";
import { errText, FlanctlError, UsageError } from "../../base/errors.ts";
import { readCappedTextAsync, safeText } from "../../base/capped_read.ts";
import { type KubeNode, type ListFrom, listNodesPaged, projectNode } from "./kube_node.ts";
import type { ResponseLimits } from "../limits.ts";

/** Annotation prefix flannel uses on Node objects (the default of --kube-annotation-prefix, normalized). */
export const ANNOTATION_PREFIX = "flannel.alpha.coreos.com/";
/** Where kube-flannel.yml keeps net-conf.json: this namespace's ConfigMap {@link NET_CONF_CONFIGMAP}. */
export const NET_CONF_NAMESPACE = "kube-flannel";
/** The name of kube-flannel.yml's ConfigMap. */
export const NET_CONF_CONFIGMAP = "kube-flannel-cfg";
/** Longest net-conf.json read from the ConfigMap (characters). */
export const NET_CONF_MAX = 64 * 1024;

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
  /**
   * How long start-up waits for our Node to appear and for a refused (403) status patch to be allowed, as
   * flanneld's AcquireLease (30 s, polling every 3 s); then the daemon exits 1. Env
   * FLANCTL_KUBE_START_WAIT_SECONDS (for tests).
   */
  startWaitMs?: number;
  /**
   * Gives free memory back (the daemon: a full GC, malloc_trim, and with `binaryPages` the binary's resident
   * pages): called before and after a re-list (410 Gone), as start-up releases before its list, so the list
   * of every Node grows from a settled heap (with the pages); and after every 1,000 Nodes of a list
   * (kube_node.ts LIST_RELEASE_EVERY; without them: the list runs on), so its garbage does not pile up until
   * the end (the peaks: docs/performance.md, "Kube mode on the real API server").
   */
  releaseMemory?: (binaryPages: boolean) => void;
}

/** flanneld's AcquireLease: its node polled every 3 s for 30 s; a refused status patch retried as long. */
export const START_WAIT_MS = 30_000;
const START_POLL_MS = 3_000;

/** Start-up cannot go on in kube mode (exit 1 at once, as flanneld): the node's name or Node is missing. */
/** How long the start-up read of our Node stands in for a fresh GET (the steps between take milliseconds). */
const START_READ_MS = 10_000;

export class KubeStartError extends FlanctlError {
  constructor(message: string) {
    super(message, 1);
  }
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
  const wait = (o.env ?? Deno.env.toObject()).FLANCTL_KUBE_START_WAIT_SECONDS;
  const startWaitMs = o.startWaitMs ?? (wait && /^\d+$/.test(wait) ? Number(wait) * 1000 : undefined);
  return new KubeStore(new KubeClient(conn), { ...o, startWaitMs });
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
      throw new MalformedLeaseError(key, `annotation ${prefix}${k} is not JSON: ${safeText(v, 120)}`);
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

/** Why a watch ended with 410 Gone (then: a re-list). */
const GONE = "Kubernetes watch expired (410 Gone): re-listing";

const sameLease = (a: Lease, b: Lease) =>
  String(a.subnet) === String(b.subnet) && String(a.ipv6Subnet) === String(b.ipv6Subnet) &&
  encodeLeaseAttrs(a.attrs) === encodeLeaseAttrs(b.attrs);

/**
 * The leases a watch knows, by Node name, capped as a list is: a watch adding more Nodes than the item cap,
 * or more lease data (attributes as written plus a fixed cost) than the kept-data cap, ends in a re-list,
 * which enforces the list's own caps.
 */
class KnownLeases {
  readonly map: Map<string, Lease>;
  #limits: ResponseLimits;
  #kept = 0;

  constructor(map: Map<string, Lease>, limits: ResponseLimits) {
    this.map = map;
    this.#limits = limits;
    for (const l of map.values()) this.#kept += KnownLeases.size(l);
  }

  static size(l: Lease): number {
    return 128 + encodeLeaseAttrs(l.attrs).length;
  }

  /** The events that turn what is known into `cur` (a new list). */
  diff(cur: Map<string, Lease>): LeaseEvent[] {
    return diffLeases(this.map, cur, sameLease);
  }

  /** Node `name` now publishes `cur` (null: none, or deleted): the lease events, or the cap it breaks. */
  apply(name: string, cur: Lease | null): LeaseEvent[] | string {
    const old = this.map.get(name);
    if (!cur) {
      if (!old) return [];
      this.map.delete(name);
      this.#kept -= KnownLeases.size(old);
      return [{ type: "removed", lease: old }];
    }
    if (old && sameLease(old, cur)) {
      this.map.set(name, cur);
      return [];
    }
    const { maxKeptBytes, maxItems } = this.#limits;
    const kept = this.#kept + KnownLeases.size(cur) - (old ? KnownLeases.size(old) : 0);
    if (kept > maxKeptBytes) return `Kubernetes watch: more than ${maxKeptBytes} bytes of node data to keep`;
    if (!old && this.map.size >= maxItems) {
      return `Kubernetes watch: more than ${maxItems} Nodes (FLANCTL_API_MAX_ITEMS)`;
    }
    this.#kept = kept;
    this.map.set(name, cur);
    const events: LeaseEvent[] = [];
    if (old && String(old.subnet) !== String(cur.subnet)) events.push({ type: "removed", lease: old });
    events.push({ type: "added", lease: cur });
    return events;
  }
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
      const pod = `${env.POD_NAMESPACE}/${env.POD_NAME}`;
      const path = `/api/v1/namespaces/${encodeURIComponent(env.POD_NAMESPACE)}/pods/${
        encodeURIComponent(env.POD_NAME)
      }`;
      try {
        const p = await this.client.request<{ spec?: { nodeName?: unknown } }>("GET", path);
        const n = p?.spec?.nodeName;
        name = typeof n === "string" && n ? n : null;
        if (!name) podError = `node name not present in pod spec '${pod}' (the pod is not scheduled yet)`;
      } catch (e) {
        if (!(e instanceof KubeApiError)) throw e; // unreachable: retried
        podError = `error retrieving pod spec for '${pod}': ${e.message}`;
      }
      // flanneld exits 1 at once here; --node-name (ours) still names the node.
      if (!name && !this.#opts.nodeName) {
        throw new KubeStartError(
          `finding our node's name: ${podError} (POD_NAME and POD_NAMESPACE must name this node's flannel ` +
            `pod; or set NODE_NAME)`,
        );
      }
    }
    name ??= this.#opts.nodeName || null;
    if (!name) {
      throw new KubeStartError(
        `cannot tell this node's name: set env NODE_NAME, or env POD_NAMESPACE and POD_NAME (the pod's ` +
          `spec.nodeName is used; the kube-flannel DaemonSet sets them from the downward API), or pass ` +
          `--node-name${podError ? ` (${podError})` : ""}`,
      );
    }
    this.#nodeName = name;
    return name;
  }

  /**
   * This node's Node as the API has it now: its name, podCIDR(s) and the messages of its latest
   * `CIDRNotAvailable` events (kube-controller-manager's: the cluster CIDR has no subnet left for it; at
   * most 3, each cut at 300 characters; null when events cannot be listed, e.g. RBAC). For doctor; no
   * start-up wait.
   */
  async ownNode(): Promise<{ name: string; podCIDRs: string[]; cidrEvents: string[] | null }> {
    const name = await this.nodeName();
    const n = await this.client.request<KubeNode>("GET", this.#nodePath(name));
    let cidrEvents: string[] | null = null;
    try {
      const sel = `involvedObject.kind=Node,involvedObject.name=${name},reason=CIDRNotAvailable`;
      const ev = await this.client.request<{ items?: unknown }>(
        "GET",
        `/api/v1/events?limit=20&fieldSelector=${encodeURIComponent(sel)}`,
      );
      cidrEvents = (Array.isArray(ev?.items) ? ev.items : []).slice(-3).map((e) => {
        const m = isObj(e) && typeof e.message === "string" ? e.message : "CIDRNotAvailable";
        // deno-lint-ignore no-control-regex
        return m.replace(/[\x00-\x1f\x7f]/g, " ").slice(0, 300);
      });
    } catch (e) {
      if (!(e instanceof KubeApiError)) throw e;
    }
    return { name, podCIDRs: podCidrs(n).map(String), cidrEvents };
  }

  /**
   * The net-conf.json of the kube-flannel ConfigMap as the API has it now, and which ConfigMap it is (namespace kube-flannel, or
   * POD_NAMESPACE inside the DaemonSet's pod; name kube-flannel-cfg, as kube-flannel.yml), parsed and
   * validated as `--net-config-path` would be. For doctor on the host, where the DaemonSet's mount of it is
   * not; deploy/kube-flanctl.yml's Role grants `get` on this one ConfigMap. Bounded by the client's body cap
   * and {@link NET_CONF_MAX}; errors are typed (KubeApiError: RBAC, not found; ConfigError: its content).
   */
  async netConfigMap(): Promise<{ where: string; config: NetConfig }> {
    const env = this.#opts.env ?? Deno.env.toObject();
    const ns = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(env.POD_NAMESPACE ?? "")
      ? env.POD_NAMESPACE!
      : NET_CONF_NAMESPACE;
    const cm = await this.client.request<{ data?: unknown }>(
      "GET",
      `/api/v1/namespaces/${ns}/configmaps/${NET_CONF_CONFIGMAP}`,
    );
    const text = isObj(cm?.data) ? cm.data["net-conf.json"] : undefined;
    const where = `ConfigMap ${ns}/${NET_CONF_CONFIGMAP}`;
    if (typeof text !== "string") throw new ConfigError("net-conf", `${where} has no net-conf.json`);
    if (text.length > NET_CONF_MAX) {
      throw new ConfigError("net-conf", `${where}: net-conf.json is over ${NET_CONF_MAX} characters`);
    }
    try {
      return { where, config: parseNetConfig(text, this.#configWarn ? { warn: this.#configWarn } : {}) };
    } catch (e) {
      throw new ConfigError("net-conf", `${where}: ${safeText(errText(e))}`);
    }
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
      // The start-up read (one GET for the stored public IP, backend data and this); a node changed since
      // fails the patch's resourceVersion precondition (409) and is read again.
      const fresh = this.#startRead && Date.now() - this.#startRead.at < START_READ_MS;
      const node = fresh ? this.#startRead!.node : await this.#getNode(name);
      this.#startRead = null;
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
      // From the start-up read, the patch is sent even when nothing differs: its precondition is what
      // proves the read still current (a no-op patch writes nothing).
      if (fresh || Object.entries(want).some(([k, v]) => have[k] !== v)) {
        try {
          // Through the status subresource, as flannel: kube-flannel's ClusterRole grants `patch` on
          // nodes/status only. The resourceVersion makes it conditional (409 when the node changed).
          const patched = await this.#patchStatus<KubeNode>(
            name,
            { metadata: { resourceVersion: node.metadata.resourceVersion, annotations: want } },
            "publishing our lease annotations",
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
    const a = (await this.#startNode()).metadata.annotations ?? {};
    return {
      publicIP: a[`${this.prefix}node-public-ip`] || null,
      publicIPv6: a[`${this.prefix}node-public-ipv6`] || null,
    };
  }

  /**
   * Our node's published `backend-data` (family 6: `backend-v6-data`), parsed; null when absent or not JSON.
   */
  async storedBackendData(family: 4 | 6 = 4): Promise<unknown> {
    const a = (await this.#startNode()).metadata.annotations ?? {};
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

  /** Set once our Node was read: from then on a 404 means it was deleted (the lease is gone), no wait. */
  #nodeSeen = false;

  /**
   * Retries `fn` while it fails with an API error `retryIf` accepts, every 3 s for {@link START_WAIT_MS} (as
   * flanneld's AcquireLease), the last try at the wait's end, saying so once; then throws what `fail` makes of
   * the last error. Other errors (unreachable: retried by the daemon) propagate at once.
   */
  async #startWait<T>(
    fn: () => Promise<T>,
    retryIf: (e: KubeApiError) => boolean,
    waiting: string,
    fail: (e: KubeApiError, secs: number) => Error,
  ): Promise<T> {
    const limit = this.#opts.startWaitMs ?? START_WAIT_MS;
    const t0 = Date.now();
    let last = false; // the sleep before this try reached t0 + limit
    for (let said = false;; said = true) {
      try {
        return await fn();
      } catch (e) {
        if (!(e instanceof KubeApiError) || !retryIf(e)) throw e;
        // the last try is at t0 + limit however long each took: a slow API shortens no wait
        const elapsed = Date.now() - t0;
        if (last || elapsed >= limit) throw fail(e, Math.round(limit / 1000));
        if (!said) (this.#opts.warn ?? plainWarn)(`${waiting}; waiting up to ${limit / 1000}s (as flanneld)`);
        const wait = Math.min(START_POLL_MS, limit - elapsed);
        last = elapsed + wait >= limit;
        await sleep(wait, this.#closed.signal);
        if (this.#closed.signal.aborted) throw e;
      }
    }
  }

  /**
   * Our Node as read once at start-up, shared by {@link storedPublicIP}, {@link storedBackendData} and the
   * first attempt of {@link acquireLease} (which drops it; older than START_READ_MS it reads again): one GET
   * where each read its own.
   */
  #startRead: { node: KubeNode; at: number } | null = null;

  async #startNode(): Promise<KubeNode> {
    if (!this.#startRead || Date.now() - this.#startRead.at >= START_READ_MS) {
      this.#startRead = { node: await this.#getNode(await this.nodeName()), at: Date.now() };
    }
    return this.#startRead.node;
  }

  async #getNode(name: string): Promise<KubeNode> {
    const get = () => this.client.request<KubeNode>("GET", this.#nodePath(name));
    const check = "check NODE_NAME, POD_NAMESPACE/POD_NAME or --node-name";
    if (!this.#nodeSeen) {
      const n = await this.#startWait(
        get,
        (e) => e.status === 404,
        `node "${name}" not found in the Kubernetes API yet`,
        (_e, secs) =>
          new KubeStartError(`node "${name}" not found in the Kubernetes API after ${secs}s (${check})`),
      );
      this.#nodeSeen = true;
      return n;
    }
    try {
      return await get();
    } catch (e) {
      if (e instanceof KubeApiError && e.status === 404) {
        throw new LeaseNotFoundError(`node "${name}" not found in the Kubernetes API (${check})`);
      }
      throw e;
    }
  }

  /** A status patch of our node; refused (403, RBAC) it is retried for the start-up wait, then fatal. */
  #patchStatus<T>(name: string, body: unknown, what: string): Promise<T> {
    return this.#startWait(
      () =>
        this.client.request<T>(
          "PATCH",
          `${this.#nodePath(name)}/status`,
          body,
          "application/strategic-merge-patch+json",
        ),
      (e) => e.status === 403,
      `${what} on node "${name}" was refused (HTTP 403)`,
      (e, secs) =>
        new KubeStartError(
          `${what} on node "${name}" still refused after ${secs}s: ${e.message} (grant patch on nodes/status, ` +
            `as kube-flannel's ClusterRole does)`,
        ),
    );
  }

  async #setNetworkAvailable(name: string): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    await this.#patchStatus(
      name,
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
      "setting NetworkUnavailable=False",
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

  /** Where the next list starts (client-go's reflector: the last resourceVersion seen, and whether paged). */
  #from: ListFrom = {};

  async #list(): Promise<{ leases: Map<string, Lease>; rv: string }> {
    const l = await listNodesPaged(
      this.client,
      this.prefix,
      this.#from,
      undefined,
      () => this.#release(false),
    );
    this.#from = { rv: l.rv || undefined, paginated: l.paginated };
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

  /**
   * The watch request for `rv`, as client-go's reflector asks (keys sorted as url.Values encodes them):
   * bookmarks on, and `timeoutSeconds` = the base × (1 + rand) so the server ends it (5-10 min by default).
   * Returns the path and the client's own deadline: that timeout plus min(30 s, the base).
   */
  #watchRequest(rv: string): { path: string; deadlineMs: number } {
    const base = this.client.limits.watchTimeoutSec;
    const timeout = Math.floor(base * (1 + Math.random()));
    return {
      path: `/api/v1/nodes?allowWatchBookmarks=true&resourceVersion=${
        encodeURIComponent(rv)
      }&timeoutSeconds=${timeout}&watch=true`,
      deadlineMs: (timeout + Math.min(30, base)) * 1000,
    };
  }

  /**
   * Watches Nodes from `cursor`, as client-go's reflector: bookmarks move the resourceVersion on; a watch the
   * server ends after its timeout (having lasted a second or delivered something) is re-opened at once; every
   * other end — 410 Gone (then a re-list from the last resourceVersion and a diff), a failure, an ERROR
   * event, a watch closed at once, one still open past its deadline (abandoned), a cap broken — waits the
   * backoff (800 ms doubling to 30 s, jittered) first, so a server answering every watch with 410 gets a
   * handful of requests, not hundreds.
   */
  async *watchLeases(cursor: string, signal: AbortSignal): AsyncIterable<LeaseEvent[]> {
    const stop = AbortSignal.any([signal, this.#closed.signal]);
    let rv = cursor;
    let known = new KnownLeases(new Map(this.#snapshots.get(cursor) ?? []), this.client.limits);
    let needList = !this.#snapshots.has(cursor);
    const backoff = new WatchRetry(this.#opts.warn);
    while (!stop.aborted) {
      if (needList) {
        try {
          // client-go re-lists from the last resourceVersion the watch saw, not the last list's.
          if (rv) this.#from = { ...this.#from, rv };
          this.#release();
          const l = await this.#list();
          const events = known.diff(l.leases);
          known = new KnownLeases(l.leases, this.client.limits);
          rv = l.rv;
          needList = false;
          this.#release();
          if (events.length) yield events;
        } catch (e) {
          if (stop.aborted) break;
          await backoff.wait(`Kubernetes re-list failed (${errText(e)})`, stop);
          continue;
        }
      }
      let trouble: string | null = null;
      const started = Date.now();
      let got = 0;
      try {
        const req = this.#watchRequest(rv);
        for await (
          const raw of this.client.watch<KubeNode & { code?: number }>(req.path, stop, req.deadlineMs)
        ) {
          got++;
          const ev = this.#watchEvent(raw);
          if (typeof ev === "string") {
            trouble = ev;
            needList ||= ev === GONE;
            break;
          }
          rv = ev.object.metadata.resourceVersion ?? rv;
          if (ev.type === "BOOKMARK") continue;
          const cur = ev.type === "DELETED" ? null : this.#toLease(ev.object);
          const events = known.apply(ev.object.metadata.name, cur);
          if (typeof events === "string") {
            trouble = events;
            needList = true;
            break;
          }
          if (events.length) yield events;
        }
        if (!trouble && got === 0 && Date.now() - started < 1000) {
          trouble = "Kubernetes watch closed at once without an event"; // client-go's "very short watch"
        }
      } catch (e) {
        if (stop.aborted) break;
        if (e instanceof KubeApiError && e.status === 410) {
          needList = true;
          trouble = GONE;
        } else if (e instanceof WatchTimeoutError) {
          // Open for its whole timeout (minutes): re-opened at once, its length bounds the rate.
          (this.#opts.warn ?? plainWarn)(`${e.message}; watching again from resourceVersion ${rv}`);
        } else trouble = `Kubernetes watch failed (${errText(e)})`;
      }
      if (stop.aborted) break;
      if (trouble) await backoff.wait(trouble, stop);
    }
  }

  /**
   * One line of a watch: the event with its Node projected (only those fields stay alive; the rest of a
   * ~10 KB Node is garbage at once), or why the watch ends ({@link GONE} for 410: a re-list).
   */
  #watchEvent(raw: { type?: unknown; object?: unknown } | null): { type: string; object: KubeNode } | string {
    if (raw?.type === "ERROR") {
      const o = (raw.object ?? {}) as { code?: unknown };
      if (o.code === 410) return GONE;
      return `Kubernetes watch error: ${safeText(JSON.stringify(raw.object ?? null) ?? "")}`;
    }
    if (typeof raw?.type !== "string" || !["ADDED", "MODIFIED", "DELETED", "BOOKMARK"].includes(raw.type)) {
      return `Kubernetes watch sent an event of type ${safeText(String(raw?.type), 40)}`;
    }
    return { type: raw.type, object: projectNode(raw.object, this.prefix) };
  }

  /** The release hook (failures ignored: it only gives memory back). */
  #release(binaryPages = true): void {
    try {
      this.#opts.releaseMemory?.(binaryPages);
    } catch { /* not glibc, or no gc(): nothing to give back */ }
  }

  /** Stops watchers and closes the client. */
  close(): Promise<void> {
    this.#closed.abort();
    this.client.close();
    return Promise.resolve();
  }
}
