/**
 * Bounds on what an API server or etcd may send the kube and etcd clients (both are untrusted peers): a byte
 * cap per response body, per watch event (one line of a watch stream, one item of a list, one object), a cap
 * on pages and items per list and on the node data the kube store keeps, and the watch timeout. Every cap is
 * enforced while reading: a response that passes it is refused (cancelled) at that byte, never buffered
 * whole first, so memory stays bounded whatever the server sends.
 *
 * Defaults (sized from 5000 realistic Nodes, Kubernetes' supported maximum; the sizing and its figures are
 * in docs/performance.md, "API and etcd response caps"):
 * - body 128 MiB: the watch cache answers `resourceVersion=0` with the whole list in one response (it
 *   ignores `limit` there), and a Node as an apiserver sends it (managedFields, up to 50 images) is 12-20 KB;
 *   a larger list falls back to a consistent list in pages of 500, so the cap does not limit the cluster
 *   size. Lists are parsed item by item (lib/store/kube/json_list.ts): this bounds time and bandwidth, not
 *   memory.
 * - event 2 MiB: one watch line, list item or object (above etcd's 1.5 MiB request limit, which bounds any
 *   object the apiserver stores).
 * - 100 pages and 50,000 items per list (10× Kubernetes' limit), 16 MiB of node data kept.
 * - etcd: body and watch line 16 MiB (a range page of 500 leases, or a watch message catching up on every
 *   lease with its previous value, fits many times).
 *
 * Each is configurable by environment (the daemon's and every command's): FLANCTL_API_MAX_BODY_BYTES,
 * FLANCTL_API_MAX_EVENT_BYTES, FLANCTL_API_MAX_PAGES, FLANCTL_API_MAX_ITEMS (kube), FLANCTL_ETCD_MAX_BYTES
 * (etcd body and line), FLANCTL_KUBE_WATCH_TIMEOUT_SECONDS (the watch timeout, below) and
 * FLANCTL_ETCD_WATCH_IDLE_SECONDS. Sizes take a Ki/Mi/Gi suffix.
 * @module
 */
import { StoreError } from "./errors.ts";
import { UsageError } from "../base/errors.ts";
import { safeText } from "../base/capped_read.ts";

/** The caps of one client. */
export interface ResponseLimits {
  /** Bytes of one response body (a list page, or the whole list from the watch cache). */
  maxBodyBytes: number;
  /** Bytes of one watch event line, one list item or one object response. */
  maxEventBytes: number;
  /** Pages per list (`continue` / etcd `more`). */
  maxPages: number;
  /** Items per list, and Nodes a watch may add to what it knows. */
  maxItems: number;
  /** Bytes of node data the kube store keeps from one list (or its watch). */
  maxKeptBytes: number;
  /**
   * Kube: each watch asks the server to end it after `timeoutSeconds` = this × (1 + rand) (client-go's
   * reflector: a 5 minute minimum, so 5-10 min), and abandons it itself when it is still open 30 s (at most
   * the base) after that: a silent or stuck watch is re-established. Etcd: a watch that delivers nothing
   * (no event, no progress notification) for this long is abandoned and re-opened from its revision.
   */
  watchTimeoutSec: number;
}

const MiB = 1024 * 1024;

/** The kube client's defaults (see the module doc). */
export const KUBE_LIMITS: Readonly<ResponseLimits> = {
  maxBodyBytes: 128 * MiB,
  maxEventBytes: 2 * MiB,
  maxPages: 100,
  maxItems: 50_000,
  maxKeptBytes: 16 * MiB,
  watchTimeoutSec: 300,
};

/**
 * The etcd client's defaults. The watch timeout is etcd's progress-notify interval (10 min, the watch asks for
 * progress notifications) plus a minute.
 */
export const ETCD_LIMITS: Readonly<ResponseLimits> = {
  maxBodyBytes: 16 * MiB,
  maxEventBytes: 16 * MiB,
  maxPages: 100,
  maxItems: 50_000,
  maxKeptBytes: 16 * MiB,
  watchTimeoutSec: 660,
};

/** Which cap a response broke. */
export type CapKind = "body" | "event" | "items" | "pages" | "kept";

/** A response broke a cap: refused (retried like any store refusal). */
export class ResponseTooLargeError extends StoreError {
  /** The cap. */
  readonly cap: CapKind;
  constructor(message: string, cap: CapKind) {
    super(message);
    this.cap = cap;
  }
}

/** `64Mi`, `2097152`, `512Ki` → bytes; null when it does not parse. */
function parseSize(v: string): number | null {
  const m = /^\s*(\d+)\s*(Ki|Mi|Gi|K|M|G)?B?\s*$/.exec(v);
  if (!m) return null;
  const mult = { K: 1024, Ki: 1024, M: MiB, Mi: MiB, G: 1024 * MiB, Gi: 1024 * MiB }[m[2] ?? ""] ?? 1;
  return Number(m[1]) * mult;
}

function envNumber(
  env: Record<string, string | undefined>,
  name: string,
  dflt: number,
  size: boolean,
): number {
  const v = env[name];
  if (v === undefined || v === "") return dflt;
  const n = size ? parseSize(v) : /^\s*\d+\s*$/.test(v) ? Number(v) : null;
  if (n === null || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(
      `${name}: '${v.slice(0, 40)}' is not a positive ${size ? "size (bytes, or with Ki/Mi/Gi)" : "integer"}`,
    );
  }
  return n;
}

/** The kube client's limits: {@link KUBE_LIMITS} with the environment's overrides. */
export function kubeLimits(env: Record<string, string | undefined> = Deno.env.toObject()): ResponseLimits {
  const d = KUBE_LIMITS;
  return {
    maxBodyBytes: envNumber(env, "FLANCTL_API_MAX_BODY_BYTES", d.maxBodyBytes, true),
    maxEventBytes: envNumber(env, "FLANCTL_API_MAX_EVENT_BYTES", d.maxEventBytes, true),
    maxPages: envNumber(env, "FLANCTL_API_MAX_PAGES", d.maxPages, false),
    maxItems: envNumber(env, "FLANCTL_API_MAX_ITEMS", d.maxItems, false),
    maxKeptBytes: d.maxKeptBytes,
    watchTimeoutSec: envNumber(env, "FLANCTL_KUBE_WATCH_TIMEOUT_SECONDS", d.watchTimeoutSec, false),
  };
}

/** The etcd client's limits: {@link ETCD_LIMITS} with the environment's overrides. */
export function etcdLimits(env: Record<string, string | undefined> = Deno.env.toObject()): ResponseLimits {
  const d = ETCD_LIMITS;
  const bytes = envNumber(env, "FLANCTL_ETCD_MAX_BYTES", d.maxBodyBytes, true);
  return {
    ...d,
    maxBodyBytes: bytes,
    maxEventBytes: bytes,
    maxPages: envNumber(env, "FLANCTL_API_MAX_PAGES", d.maxPages, false),
    maxItems: envNumber(env, "FLANCTL_API_MAX_ITEMS", d.maxItems, false),
    watchTimeoutSec: envNumber(env, "FLANCTL_ETCD_WATCH_IDLE_SECONDS", d.watchTimeoutSec, false),
  };
}

/**
 * Reads a response body to its end, at most `max` bytes: one byte more cancels it and throws
 * {@link ResponseTooLargeError} naming `what` and the variable that raises the cap.
 */
export async function readBodyCapped(r: Response, max: number, what: string, knob: string): Promise<string> {
  if (!r.body) return "";
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  const parts: string[] = [];
  let n = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      n += value.length;
      if (n > max) {
        throw new ResponseTooLargeError(
          `${what}: the response is larger than ${max} bytes (refused; ${knob} raises the cap)`,
          "body",
        );
      }
      parts.push(dec.decode(value, { stream: true }));
    }
    parts.push(dec.decode());
    return parts.join("");
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** {@link readBodyCapped} parsed as JSON (a StoreError naming `what` when it is not JSON). */
export async function readJsonCapped<T>(r: Response, max: number, what: string, knob: string): Promise<T> {
  const text = await readBodyCapped(r, max, what, knob);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new StoreError(`${what}: the response is not JSON: ${safeText(text, 120)}`);
  }
}
