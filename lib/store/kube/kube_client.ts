/**
 * A small Kubernetes API client for what the kube store needs: GET/LIST/PATCH of Nodes and a watch
 * stream, authenticated from a kubeconfig file (server, CA, token or client certificate) or the
 * in-cluster service account. Hand-written on fetch because the official client
 * (@kubernetes/client-node) drags in ~40 packages and a request library for four calls; kubeconfig YAML is
 * parsed with npm:yaml (no dependencies).
 * @module
 */
import { StoreError, StoreUnavailableError } from "../errors.ts";
import { jsonLines, userAgent } from "../util.ts";
import { excerpt, readCappedText, safeText } from "../../base/capped_read.ts";
import { kubeLimits, readJsonCapped, type ResponseLimits } from "../limits.ts";
import { readJsonList } from "./json_list.ts";
import { errText } from "../../base/errors.ts";

/** The watch abandoned by the client: still open past its timeout (the server's timeoutSeconds + a margin). */
export class WatchTimeoutError extends StoreUnavailableError {}

/** How to reach the API server. */
export interface KubeConnection {
  server: string;
  caPem?: string;
  certPem?: string;
  keyPem?: string;
  token?: string;
  /**
   * File the token came from; the client re-reads it when it changes (bound service-account tokens are
   * rotated by the kubelet, hourly by default), as client-go's BearerTokenFile does.
   */
  tokenFile?: string;
  /** Where the settings came from (for error messages). */
  source: string;
}

/** An API error with the HTTP status (409 conflict, 410 gone, 404 not found, …). */
export class KubeApiError extends StoreError {
  /** HTTP status code. */
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** A watch event as the API streams it (one JSON object per line). */
export interface KubeWatchEvent<T> {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: T;
}

const SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

function readFile(what: string, path: string): string {
  try {
    return readCappedText(path);
  } catch (e) {
    throw new StoreError(`${what}: cannot read ${path}: ${errText(e)}`);
  }
}

function b64text(s: string): string {
  const bin = atob(s.replace(/\s+/g, ""));
  return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
}

type Obj = Record<string, unknown>;

/**
 * npm:yaml's `parse`, loaded on first use. Its CommonJS build calls `require("node:process")` when it is
 * evaluated; in install.sh's bundles (daemon.js) that call goes through the bundler's shim, which uses a
 * global `require` and else throws `Dynamic require of "node:process" is not supported` (so the installed
 * daemon failed with --kubeconfig-file). A `require` from node:module is put in place for that evaluation
 * only (when none exists), and removed again.
 */
async function yamlParse(): Promise<(text: string) => unknown> {
  const g = globalThis as { require?: unknown };
  if (typeof g.require !== "undefined") return (await import("yaml")).parse;
  const { createRequire } = await import("node:module");
  g.require = createRequire(import.meta.url);
  try {
    return (await import("yaml")).parse;
  } finally {
    delete g.require;
  }
}

/** Loads a kubeconfig file (YAML or JSON): the current context's cluster and user. */
export async function loadKubeconfig(path: string): Promise<KubeConnection> {
  const parse = await yamlParse();
  const text = readFile("--kubeconfig-file", path);
  let doc: Obj;
  try {
    doc = parse(text) as Obj;
  } catch (e) {
    // The parser's message quotes the offending line with a caret under it: only its first line (where),
    // never the file's content.
    throw new StoreError(`--kubeconfig-file: ${path} is not valid YAML: ${errText(e).split("\n")[0]}`);
  }
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".";
  const rel = (p: string) => (p.startsWith("/") ? p : `${dir}/${p}`);
  const named = (list: unknown, name: unknown, what: string): Obj => {
    const hit = (Array.isArray(list) ? list : []).find((x: Obj) => x?.name === name) as Obj | undefined;
    if (!hit) {
      throw new StoreError(`--kubeconfig-file: ${path} has no ${what} named ${excerpt(String(name))}`);
    }
    return (hit[what] ?? {}) as Obj;
  };
  const ctxName = doc["current-context"] ??
    (Array.isArray(doc.contexts) && doc.contexts.length === 1 ? (doc.contexts[0] as Obj).name : undefined);
  if (!ctxName) throw new StoreError(`--kubeconfig-file: ${path} has no current-context`);
  const ctx = named(doc.contexts, ctxName, "context");
  const cluster = named(doc.clusters, ctx.cluster, "cluster");
  const user = ctx.user === undefined ? {} : named(doc.users, ctx.user, "user");
  if (typeof cluster.server !== "string") {
    throw new StoreError(`--kubeconfig-file: cluster '${ctx.cluster}' has no server`);
  }
  const pem = (data: unknown, file: unknown, what: string) =>
    typeof data === "string"
      ? b64text(data)
      : typeof file === "string"
      ? readFile(what, rel(file))
      : undefined;
  return {
    server: cluster.server.replace(/\/$/, ""),
    caPem: pem(
      cluster["certificate-authority-data"],
      cluster["certificate-authority"],
      "certificate-authority",
    ),
    certPem: pem(user["client-certificate-data"], user["client-certificate"], "client-certificate"),
    keyPem: pem(user["client-key-data"], user["client-key"], "client-key"),
    token: typeof user.token === "string"
      ? user.token
      : typeof user.tokenFile === "string"
      ? readFile("tokenFile", rel(user.tokenFile)).trim()
      : undefined,
    tokenFile: typeof user.token !== "string" && typeof user.tokenFile === "string"
      ? rel(user.tokenFile)
      : undefined,
    source: path,
  };
}

/**
 * The in-cluster service account connection, as client-go's InClusterConfig: `https://` +
 * KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT (both required), the token from `<saDir>/token` (re-read
 * when it changes), and `<saDir>/ca.crt` as CA when it can be read (else the system roots, as client-go).
 */
export function inClusterConnection(
  env: Record<string, string | undefined> = Deno.env.toObject(),
  saDir = SA_DIR,
): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST, port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new StoreError(
      "--kube-subnet-mgr: not running in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must " +
        "both be set): pass --kubeconfig-file or --kube-api-url",
    );
  }
  let caPem: string | undefined;
  try {
    caPem = readCappedText(`${saDir}/ca.crt`);
  } catch { /* client-go goes on without the CA file: the system roots apply */ }
  return {
    server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    caPem,
    token: readFile("service account token", `${saDir}/token`).trim(),
    tokenFile: `${saDir}/token`,
    source: "in-cluster service account",
  };
}

/** At most `max` bytes of a body, decoded (the rest is cancelled). */
async function readBodyPrefix(r: Response, max: number): Promise<string> {
  if (!r.body) return "";
  const reader = r.body.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  try {
    while (n < max) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value.subarray(0, max - n));
      n += value.length;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return new TextDecoder().decode(out);
}

/** The API client. */
export class KubeClient {
  /** The connection in use. */
  readonly conn: KubeConnection;
  /** The response caps (lib/store/limits.ts). */
  readonly limits: ResponseLimits;
  /** Requests sent (each list page and watch counts one). */
  requests = 0;
  #http: Deno.HttpClient | undefined;

  constructor(conn: KubeConnection, limits: ResponseLimits = kubeLimits()) {
    this.conn = conn;
    this.limits = limits;
    if (conn.caPem || conn.certPem) {
      this.#http = Deno.createHttpClient({
        ...(conn.caPem ? { caCerts: [conn.caPem] } : {}),
        ...(conn.certPem && conn.keyPem ? { cert: conn.certPem, key: conn.keyPem } : {}),
      });
    }
  }

  #token: string | undefined;
  #tokenStamp = "";

  /** The bearer token, re-read from its file when the file changed (mtime or size). */
  #currentToken(): string | undefined {
    const f = this.conn.tokenFile;
    if (!f) return this.conn.token;
    try {
      const st = Deno.statSync(f);
      const stamp = `${st.mtime?.getTime()}:${st.size}:${st.ino}`;
      if (stamp !== this.#tokenStamp) {
        // Type-checked and capped as every file we read: a FIFO or device here keeps the last token.
        this.#token = readCappedText(f, 64 * 1024).trim();
        this.#tokenStamp = stamp;
      }
    } catch { /* unreadable for a moment (the kubelet swaps it atomically): keep the last token */ }
    return this.#token ?? this.conn.token;
  }

  async #fetch(method: string, path: string, body?: unknown, contentType?: string, signal?: AbortSignal) {
    const headers: Record<string, string> = { accept: "application/json", "user-agent": userAgent() };
    const token = this.#currentToken();
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = contentType ?? "application/json";
    let r: Response;
    this.requests++;
    try {
      r = await fetch(`${this.conn.server}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        client: this.#http,
        signal: signal ?? AbortSignal.timeout(15_000),
      });
    } catch (e) {
      if (signal?.aborted) throw e;
      throw new StoreUnavailableError(
        `Kubernetes API ${this.conn.server} unreachable: ${
          errText(e)
        } (check --kube-api-url / ${this.conn.source})`,
        { cause: e },
      );
    }
    if (!r.ok) {
      // An error body is a Status of a few hundred bytes: read at most 64 KiB of it, print at most 300 chars.
      let text = "";
      try {
        text = await readBodyPrefix(r, 64 * 1024);
      } catch { /* the body failed: the status says enough */ }
      let msg = text.trim();
      try {
        const m = (JSON.parse(text) as { message?: unknown }).message;
        if (typeof m === "string") msg = m;
      } catch { /* not a Status */ }
      throw new KubeApiError(
        r.status,
        `Kubernetes API ${method} ${path}: HTTP ${r.status}: ${safeText(msg)}`,
      );
    }
    return r;
  }

  /** A JSON request; the response is one object, at most the event cap (FLANCTL_API_MAX_EVENT_BYTES). */
  async request<T>(method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
    const r = await this.#fetch(method, path, body, contentType);
    return await readJsonCapped<T>(
      r,
      this.limits.maxEventBytes,
      `Kubernetes API ${method} ${path}`,
      "FLANCTL_API_MAX_EVENT_BYTES",
    );
  }

  /**
   * A list (GET `path`), read as a stream: `onItem` gets each item as soon as it is parsed; returns the
   * list's other fields (metadata). Capped at the body, event and item caps.
   */
  async list(path: string, onItem: (item: unknown) => void): Promise<Record<string, unknown>> {
    const r = await this.#fetch("GET", path, undefined, undefined, AbortSignal.timeout(120_000));
    return await readJsonList(r.body!, {
      maxBodyBytes: this.limits.maxBodyBytes,
      maxItemBytes: this.limits.maxEventBytes,
      maxItems: this.limits.maxItems,
      what: `Kubernetes API GET ${path}`,
    }, onItem);
  }

  /**
   * Streams watch events from `path` (which carries `?…&watch=true`), each line at most the event cap. When
   * `deadlineMs` passes with the watch still open, it is abandoned: {@link WatchTimeoutError}.
   */
  async *watch<T>(path: string, signal: AbortSignal, deadlineMs?: number): AsyncGenerator<KubeWatchEvent<T>> {
    const deadline = deadlineMs === undefined ? null : AbortSignal.timeout(deadlineMs);
    const stop = deadline ? AbortSignal.any([signal, deadline]) : signal;
    try {
      const r = await this.#fetch("GET", path, undefined, undefined, stop);
      yield* jsonLines<KubeWatchEvent<T>>(
        r.body!,
        stop,
        this.limits.maxEventBytes,
        "Kubernetes watch (FLANCTL_API_MAX_EVENT_BYTES raises the cap)",
      );
    } catch (e) {
      if (!(deadline?.aborted && !signal.aborted)) throw e;
    }
    if (deadline?.aborted && !signal.aborted) {
      throw new WatchTimeoutError(`Kubernetes watch still open after ${deadlineMs! / 1000}s: abandoned`);
    }
  }

  /** Closes the HTTP client. */
  close(): void {
    this.#http?.close();
  }
}
