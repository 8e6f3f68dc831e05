/**
 * A minimal etcd v3 client over etcd's JSON gateway (`/v3/kv/range`, `/v3/kv/txn`, `/v3/watch`,
 * `/v3/lease/*`, `/v3/auth/authenticate`) using `fetch`.
 *
 * Why not npm:etcd3: it pulls in gRPC (@grpc/grpc-js, protobufjs), too heavy for the daemon's memory budget
 * (measured: docs/performance.md, "etcd client"). The gateway ships with
 * every etcd ≥ 3.3 (Debian's is 3.4), so nothing extra is needed on the server side.
 * @module
 */
import { StoreError, StoreUnavailableError } from "../errors.ts";
import { errText, UsageError } from "../../base/errors.ts";
import { jsonLines, userAgent } from "../util.ts";
import { readCappedText, safeText } from "../../base/capped_read.ts";
import {
  etcdLimits,
  readBodyCapped,
  readJsonCapped,
  type ResponseLimits,
  ResponseTooLargeError,
} from "../limits.ts";

/** Connection options. */
export interface EtcdClientOptions {
  /** Client URLs (http:// or https://), tried in order. */
  endpoints: string[];
  /** PEM CA bundle path. */
  caFile?: string;
  /** PEM client certificate path. */
  certFile?: string;
  /** PEM client key path. */
  keyFile?: string;
  /** etcd user (with password): a token from /v3/auth/authenticate goes in every request. */
  username?: string;
  /** etcd password. */
  password?: string;
  /** Per-request timeout in ms (default 10 s; not applied to watches). */
  timeoutMs?: number;
  /** Response caps (default: lib/store/limits.ts's etcd limits with the environment's overrides). */
  limits?: ResponseLimits;
}

/** A key-value as the gateway returns it (int64s arrive as strings; key/value are decoded here). */
export interface EtcdKV {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  /** etcd lease ID ("0" = none). Kept as a string: IDs exceed 2^53. */
  lease: string;
}

/** Raw gateway KV. */
interface RawKV {
  key?: string;
  value?: string;
  create_revision?: string;
  mod_revision?: string;
  lease?: string;
}

/** One message of the gateway's watch stream, as it arrives. */
interface WatchResponseWire {
  result?: {
    header?: { revision?: string };
    compact_revision?: string;
    canceled?: boolean;
    events?: { type?: string; kv?: RawKV; prev_kv?: RawKV }[];
  };
  error?: { message?: string };
}

/** A watch event. */
export interface EtcdWatchEvent {
  type: "PUT" | "DELETE";
  kv: EtcdKV;
  prevKv: EtcdKV | null;
}

/** A watch response message. */
export interface EtcdWatchMessage {
  revision: number;
  compactRevision: number;
  canceled: boolean;
  events: EtcdWatchEvent[];
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * UTF-8 text → base64, with V8's native Uint8Array base64 codec. Not node:buffer (which this was): loading
 * Node's Buffer made the daemon touch more of the Deno binary's code (docs/performance.md, "etcd
 * client"), and the native codec is as fast.
 */
export function b64(s: string): string {
  return enc.encode(s).toBase64();
}

/** base64 → UTF-8 text. */
export function unb64(s: string | undefined): string {
  return s ? dec.decode(Uint8Array.fromBase64(s)) : "";
}

/** The range end that selects every key with `prefix` (prefix with its last byte + 1). */
export function prefixEnd(prefix: string): string {
  const b = enc.encode(prefix);
  let i = b.length - 1;
  while (i >= 0 && b[i] === 0xff) i--;
  const out = b.slice(0, i + 1);
  out[i]++;
  return out.toBase64();
}

function kv(r: RawKV): EtcdKV {
  return {
    key: unb64(r.key),
    value: unb64(r.value),
    createRevision: Number(r.create_revision ?? 0),
    modRevision: Number(r.mod_revision ?? 0),
    lease: r.lease ?? "0",
  };
}

/**
 * Keys per range request when listing a prefix. One request for 5,000 leases is megabytes of JSON parsed at
 * once, with its base64 strings (the peak it made: docs/performance.md, "etcd client"); pages keep that
 * burst small.
 */
export const RANGE_PAGE = 500;

/** Everything before the host's `@` in an http(s) URL, or null. */
const USERINFO = /^(https?:\/\/)([^/]*)@/;

/**
 * Takes `user:password@` out of endpoint URLs (never printed, never sent in the URL): they become the
 * etcd username/password, as if given with --etcd-username/--etcd-password. Every URL with credentials
 * must name the same user. A URL that does not parse is returned without its userinfo, so an error
 * message can show it.
 */
export function splitCredentials(
  urls: string[],
): { endpoints: string[]; username?: string; password?: string } {
  let username: string | undefined;
  let password: string | undefined;
  const endpoints = urls.map((u) => {
    const m = USERINFO.exec(u);
    if (!m) return u;
    const info = m[2];
    const i = info.indexOf(":");
    const dec = (x: string) => {
      try {
        return decodeURIComponent(x);
      } catch {
        return x;
      }
    };
    const user = dec(i < 0 ? info : info.slice(0, i));
    const pass = i < 0 ? undefined : dec(info.slice(i + 1));
    if (username !== undefined && (user !== username || pass !== password)) {
      throw new UsageError(
        "--etcd-endpoints: the URLs carry different credentials; give them once with --etcd-username " +
          "and FLANNELD_ETCD_PASSWORD (or a password file) instead",
      );
    }
    username = user;
    password = pass;
    return m[1] + u.slice(m[0].length);
  });
  return { endpoints, username, password };
}

/** The etcd client. */
export class EtcdClient {
  /** Endpoints in use. */
  readonly endpoints: string[];
  #opts: EtcdClientOptions;
  #http: Deno.HttpClient | undefined;
  #token: string | null = null;
  #current = 0;
  /** The response caps. */
  readonly limits: ResponseLimits;

  constructor(opts: EtcdClientOptions) {
    this.limits = opts.limits ?? etcdLimits();
    if (opts.endpoints.length === 0) throw new StoreError("--etcd-endpoints: no endpoint given");
    const { endpoints, username, password } = splitCredentials(opts.endpoints);
    for (const e of endpoints) {
      if (!/^https?:\/\/[^/@]+\/?$/.test(e)) {
        // Whatever precedes an '@' may be a password that did not parse: never print it.
        const shown = e.replace(/^(https?:\/\/)?.*@/, "$1…@");
        throw new StoreError(`--etcd-endpoints: '${shown}' is not a URL like http://127.0.0.1:2379`);
      }
    }
    this.endpoints = endpoints.map((e) => e.replace(/\/$/, ""));
    if (username !== undefined) {
      if (opts.username !== undefined && opts.username !== username) {
        throw new UsageError(
          `--etcd-endpoints: the URL names user '${username}' but --etcd-username is '${opts.username}'; ` +
            `drop the credentials from the URL (the password belongs in FLANNELD_ETCD_PASSWORD or a file)`,
        );
      }
      opts = { ...opts, username, password: opts.password ?? password };
    }
    this.#opts = opts;
    if (opts.caFile || opts.certFile || opts.keyFile) {
      const read = (flag: string, p?: string) => {
        if (!p) return undefined;
        try {
          return readCappedText(p);
        } catch (e) {
          throw new StoreError(`${flag}: cannot read ${p}: ${errText(e)}`);
        }
      };
      if (!!opts.certFile !== !!opts.keyFile) {
        throw new StoreError("--etcd-certfile and --etcd-keyfile must be given together");
      }
      const ca = read("--etcd-cafile", opts.caFile);
      const cert = read("--etcd-certfile", opts.certFile);
      const key = read("--etcd-keyfile", opts.keyFile);
      this.#http = Deno.createHttpClient({
        ...(ca ? { caCerts: [ca] } : {}),
        ...(cert && key ? { cert, key } : {}),
      });
    }
  }

  /** The endpoint currently preferred. */
  get endpoint(): string {
    return this.endpoints[this.#current];
  }

  async #authenticate(base: string): Promise<void> {
    const r = await fetch(`${base}/v3/auth/authenticate`, {
      method: "POST",
      headers: { "user-agent": userAgent() },
      body: JSON.stringify({ name: this.#opts.username, password: this.#opts.password ?? "" }),
      client: this.#http,
      signal: AbortSignal.timeout(this.#opts.timeoutMs ?? 10_000),
    });
    const body = await readJsonCapped<{ token?: unknown; message?: unknown; error?: unknown }>(
      r,
      64 * 1024,
      "etcd authentication",
      "-",
    ).catch(() => ({} as { token?: unknown; message?: unknown; error?: unknown }));
    if (!r.ok || typeof body.token !== "string" || !body.token) {
      const why = typeof body.message === "string"
        ? body.message
        : typeof body.error === "string"
        ? body.error
        : r.status;
      throw new StoreError(
        `etcd authentication as '${this.#opts.username}' failed: ${safeText(String(why))} ` +
          `(check --etcd-username/--etcd-password)`,
      );
    }
    this.#token = body.token;
  }

  /**
   * Sends one request, trying each endpoint in turn. Network failures become
   * {@link StoreUnavailableError}; HTTP errors {@link StoreError} with etcd's message.
   */
  async #fetch(path: string, body: unknown, signal?: AbortSignal, stream = false): Promise<Response> {
    let lastErr: unknown = null;
    for (let n = 0; n < this.endpoints.length; n++) {
      const i = (this.#current + n) % this.endpoints.length;
      const base = this.endpoints[i];
      try {
        for (let attempt = 0; attempt < 2; attempt++) {
          if (this.#opts.username && !this.#token) await this.#authenticate(base);
          const headers: Record<string, string> = {
            "content-type": "application/json",
            "user-agent": userAgent(),
          };
          if (this.#token) headers.authorization = this.#token;
          const sigs = [signal, stream ? undefined : AbortSignal.timeout(this.#opts.timeoutMs ?? 10_000)]
            .filter((s): s is AbortSignal => !!s);
          const r = await fetch(`${base}${path}`, {
            method: "POST",
            headers,
            body: JSON.stringify(body),
            client: this.#http,
            signal: sigs.length ? AbortSignal.any(sigs) : undefined,
          });
          this.#current = i;
          if (r.ok) return r;
          const text = await readBodyCapped(r, 64 * 1024, `etcd ${base}${path}`, "-").catch(() => "");
          let msg = text;
          try {
            const j = JSON.parse(text) as { message?: unknown; error?: unknown };
            const m = typeof j.message === "string"
              ? j.message
              : typeof j.error === "string"
              ? j.error
              : null;
            if (m !== null) msg = m;
          } catch { /* not JSON */ }
          if (this.#opts.username && /token/i.test(msg) && attempt === 0) {
            this.#token = null; // expired or invalid token: authenticate again once
            continue;
          }
          throw new StoreError(`etcd ${base}${path}: HTTP ${r.status}: ${safeText(msg.trim())}`);
        }
      } catch (e) {
        if (e instanceof StoreError) throw e;
        if (signal?.aborted) throw e;
        lastErr = e;
      }
    }
    throw new StoreUnavailableError(
      `etcd unreachable at ${this.endpoints.join(",")}: ${errText(lastErr)} ` +
        `(is etcd running? check --etcd-endpoints and TLS flags)`,
      { cause: lastErr },
    );
  }

  /** POSTs JSON and returns the parsed response (at most the body cap, FLANCTL_ETCD_MAX_BYTES). */
  async call<T>(path: string, body: unknown): Promise<T> {
    const r = await this.#fetch(path, body);
    return await readJsonCapped<T>(r, this.limits.maxBodyBytes, `etcd ${path}`, "FLANCTL_ETCD_MAX_BYTES");
  }

  /**
   * Range over [key, rangeEnd) (rangeEnd base64, or a single key). Returns kvs and the store revision. A
   * range is read {@link RANGE_PAGE} keys per request, all at the revision of the first page (one consistent
   * snapshot; a compaction in between fails the call like any etcd error).
   */
  async range(key: string, rangeEnd?: string): Promise<{ kvs: EtcdKV[]; revision: number }> {
    const kvs: EtcdKV[] = [];
    let revision = 0;
    let start = b64(key);
    for (let pages = 1;; pages++) {
      if (pages > this.limits.maxPages) {
        throw new ResponseTooLargeError(
          `etcd range: more than ${this.limits.maxPages} pages (refused; FLANCTL_API_MAX_PAGES raises the cap)`,
          "pages",
        );
      }
      const r = await this.call<{ header?: { revision?: string }; kvs?: RawKV[]; more?: boolean }>(
        "/v3/kv/range",
        {
          key: start,
          ...(rangeEnd ? { range_end: rangeEnd, limit: String(RANGE_PAGE) } : {}),
          ...(revision ? { revision: String(revision) } : {}),
        },
      );
      if (!revision) revision = Number(r.header?.revision ?? 0);
      const page = Array.isArray(r.kvs) ? r.kvs : [];
      if (kvs.length + page.length > this.limits.maxItems) {
        throw new ResponseTooLargeError(
          `etcd range: more than ${this.limits.maxItems} keys (refused; FLANCTL_API_MAX_ITEMS raises the cap)`,
          "items",
        );
      }
      for (const x of page) kvs.push(kv(x));
      const last = page.at(-1)?.key;
      if (!rangeEnd || !r.more || last === undefined) return { kvs, revision };
      // The next key after `last` in etcd's byte order: `last` followed by a zero byte.
      const b = Uint8Array.fromBase64(last);
      const next = new Uint8Array(b.length + 1);
      next.set(b);
      start = next.toBase64();
    }
  }

  /** Puts key=value (optionally attached to an etcd lease) if the compare holds; returns success. */
  async txnPut(
    key: string,
    value: string,
    lease: string | null,
    compare: { target: "CREATE" | "MOD"; revision: number } | null,
  ): Promise<boolean> {
    const cmp = compare
      ? [{
        target: compare.target,
        result: "EQUAL",
        key: b64(key),
        [compare.target === "CREATE" ? "create_revision" : "mod_revision"]: String(compare.revision),
      }]
      : [];
    const r = await this.call<{ succeeded?: boolean }>("/v3/kv/txn", {
      compare: cmp,
      success: [{ request_put: { key: b64(key), value: b64(value), ...(lease ? { lease } : {}) } }],
    });
    return r.succeeded === true;
  }

  /** Deletes one key; returns how many were deleted. */
  async delete(key: string): Promise<number> {
    const r = await this.call<{ deleted?: string }>("/v3/kv/deleterange", { key: b64(key) });
    return Number(r.deleted ?? 0);
  }

  /** Grants an etcd lease of `ttlSec`; returns its ID. */
  async grant(ttlSec: number): Promise<string> {
    const r = await this.call<{ ID?: string; error?: string }>("/v3/lease/grant", { TTL: String(ttlSec) });
    if (!r.ID) throw new StoreError(`etcd lease grant failed: ${r.error ?? "no ID returned"}`);
    return r.ID;
  }

  /** Extends a lease (one keep-alive round); returns the new TTL in seconds (0 = lease gone). */
  async keepAlive(id: string): Promise<number> {
    const r = await this.#fetch("/v3/lease/keepalive", { ID: id });
    const text = await readBodyCapped(r, 64 * 1024, "etcd keepalive", "-");
    const first = text.split("\n").find((l) => l.trim());
    const j = first ? JSON.parse(first) as { result?: { TTL?: string } } : {};
    return Number(j.result?.TTL ?? 0);
  }

  /** Remaining TTL of a lease in seconds (≤ 0 when it no longer exists). */
  async timeToLive(id: string): Promise<number> {
    const r = await this.call<{ TTL?: string }>("/v3/lease/timetolive", { ID: id });
    return Number(r.TTL ?? -1);
  }

  /** Revokes a lease (its keys are deleted by etcd). */
  async revoke(id: string): Promise<void> {
    await this.call("/v3/lease/revoke", { ID: id });
  }

  /**
   * Opens a watch on [key, rangeEnd) from `startRevision` (with previous values and progress notifications)
   * and yields its messages until the stream ends, fails or `signal` aborts. Each message is at most the
   * line cap (FLANCTL_ETCD_MAX_BYTES); a watch that delivers nothing for the watch timeout (etcd's progress
   * notifications come every 10 min) is abandoned: a {@link StoreUnavailableError}.
   */
  async *watch(
    key: string,
    rangeEnd: string,
    startRevision: number,
    signal: AbortSignal,
  ): AsyncGenerator<EtcdWatchMessage> {
    const idleMs = this.limits.watchTimeoutSec * 1000;
    const idle = new AbortController();
    let timer = setTimeout(() => idle.abort(), idleMs);
    const stop = AbortSignal.any([signal, idle.signal]);
    try {
      const r = await this.#fetch(
        "/v3/watch",
        {
          create_request: {
            key: b64(key),
            range_end: rangeEnd,
            start_revision: String(startRevision),
            prev_kv: true,
            progress_notify: true,
          },
        },
        stop,
        true,
      );
      for await (
        const msg of jsonLines<WatchResponseWire>(
          r.body!,
          stop,
          this.limits.maxEventBytes,
          "etcd watch (FLANCTL_ETCD_MAX_BYTES raises the cap)",
        )
      ) {
        clearTimeout(timer);
        timer = setTimeout(() => idle.abort(), idleMs);
        if (msg?.error) {
          throw new StoreError(
            `etcd watch: ${safeText(String(msg.error.message ?? JSON.stringify(msg.error)))}`,
          );
        }
        const res = msg?.result ?? {};
        yield {
          revision: Number(res.header?.revision ?? 0),
          compactRevision: Number(res.compact_revision ?? 0),
          canceled: res.canceled === true,
          events: (Array.isArray(res.events) ? res.events : []).map((e) => ({
            type: e?.type === "DELETE" ? "DELETE" : "PUT",
            kv: kv(e?.kv ?? {}),
            prevKv: e?.prev_kv ? kv(e.prev_kv) : null,
          })),
        };
      }
    } catch (e) {
      if (!(idle.signal.aborted && !signal.aborted)) throw e;
    } finally {
      clearTimeout(timer);
    }
    if (idle.signal.aborted && !signal.aborted) {
      throw new StoreUnavailableError(`etcd watch silent for ${idleMs / 1000}s: abandoned`);
    }
  }

  /** Closes the HTTP client. */
  close(): void {
    this.#http?.close();
  }
}
