/**
 * List and watch of Pods, Namespaces and NetworkPolicies, as the kube store watches Nodes (client-go's
 * reflector): the first list from the watch cache (`limit=500&resourceVersion=0`), `continue` pages,
 * watches with bookmarks from the list's resourceVersion, 410 Gone → a re-list from the last
 * resourceVersion seen, every other end after the backoff (800 ms doubling to 30 s). Each object is
 * projected at once through the model (lib/netpol/model.ts); one that cannot be used counts as deleted.
 * @module
 */
import { KubeApiError, type KubeClient, WatchTimeoutError } from "../store/kube/kube_client.ts";
import { ResponseTooLargeError } from "../store/limits.ts";
import { WatchRetry } from "../store/util.ts";
import { errText } from "../base/errors.ts";
import { isObj } from "../base/json.ts";
import { safeText } from "../base/capped_read.ts";
import type { Warn } from "../base/warn.ts";

/** A watched kind: its API path and how its objects are projected (null: not usable, as deleted). */
export interface Kind<T> {
  what: string;
  path: string;
  project(raw: unknown): { key: string; obj: T } | null;
}

/** What the watch reports: the whole set (after a list) or one object set/removed. */
export type WatchUpdate<T> = { type: "reset"; items: Map<string, T> } | {
  type: "set";
  key: string;
  obj: T | null;
};

const PAGE = 500;

export async function listAll<T>(
  client: KubeClient,
  k: Kind<T>,
  rv: string,
): Promise<{ items: Map<string, T>; rv: string }> {
  const items = new Map<string, T>();
  let q = `limit=${PAGE}&resourceVersion=${encodeURIComponent(rv)}`;
  let listRv = "";
  for (let page = 1;; page++) {
    if (page > client.limits.maxPages) {
      throw new ResponseTooLargeError(
        `Kubernetes ${k.what} list: more than ${client.limits.maxPages} pages`,
        "pages",
      );
    }
    const top = await client.list(`${k.path}?${q}`, (raw) => {
      if (items.size >= client.limits.maxItems) {
        throw new ResponseTooLargeError(
          `Kubernetes ${k.what} list: more than ${client.limits.maxItems} items`,
          "items",
        );
      }
      const p = k.project(raw);
      if (p) items.set(p.key, p.obj);
    });
    const md = isObj(top.metadata) ? top.metadata : {};
    if (!listRv && typeof md.resourceVersion === "string") listRv = md.resourceVersion;
    const token = typeof md.continue === "string" ? md.continue : "";
    if (!token) return { items, rv: listRv };
    q = `continue=${encodeURIComponent(token)}&limit=${PAGE}`;
  }
}

/**
 * Lists then watches `k` until `signal` aborts, yielding a `reset` after every (re-)list and a `set` per
 * watch event.
 */
export async function* watchKind<T>(
  client: KubeClient,
  k: Kind<T>,
  signal: AbortSignal,
  warn?: Warn,
): AsyncIterable<WatchUpdate<T>> {
  const backoff = new WatchRetry(warn);
  let rv = "0";
  let needList = true;
  let keys = new Set<string>();
  while (!signal.aborted) {
    if (needList) {
      try {
        const l = await listAll(client, k, rv);
        rv = l.rv || rv;
        keys = new Set(l.items.keys());
        needList = false;
        yield { type: "reset", items: l.items };
      } catch (e) {
        if (signal.aborted) break;
        await backoff.wait(`Kubernetes ${k.what} list failed (${errText(e)})`, signal);
        continue;
      }
    }
    let trouble: string | null = null;
    const started = Date.now();
    let got = 0;
    try {
      const base = client.limits.watchTimeoutSec;
      const timeout = Math.floor(base * (1 + Math.random()));
      const path = `${k.path}?allowWatchBookmarks=true&resourceVersion=${
        encodeURIComponent(rv)
      }&timeoutSeconds=${timeout}&watch=true`;
      for await (const ev of client.watch<unknown>(path, signal, (timeout + Math.min(30, base)) * 1000)) {
        got++;
        const type = (ev as { type?: unknown })?.type;
        const obj = (ev as { object?: unknown })?.object;
        if (type === "ERROR") {
          const code = isObj(obj) ? obj.code : undefined;
          needList = code === 410;
          trouble = code === 410
            ? `Kubernetes ${k.what} watch expired (410 Gone): re-listing`
            : `Kubernetes ${k.what} watch error: ${safeText(JSON.stringify(obj ?? null) ?? "", 200)}`;
          break;
        }
        if (type !== "ADDED" && type !== "MODIFIED" && type !== "DELETED" && type !== "BOOKMARK") {
          trouble = `Kubernetes ${k.what} watch sent an event of type ${safeText(String(type), 40)}`;
          break;
        }
        const md = isObj(obj) && isObj(obj.metadata) ? obj.metadata : {};
        if (typeof md.resourceVersion === "string" && md.resourceVersion.length <= 64) {
          rv = md.resourceVersion;
        }
        if (type === "BOOKMARK") continue;
        const p = k.project(obj);
        if (!p) continue;
        if (type === "DELETED") keys.delete(p.key);
        else keys.add(p.key);
        if (keys.size > client.limits.maxItems) {
          trouble = `Kubernetes ${k.what} watch: more than ${client.limits.maxItems} items: re-listing`;
          needList = true;
          break;
        }
        yield { type: "set", key: p.key, obj: type === "DELETED" ? null : p.obj };
      }
      if (!trouble && got === 0 && Date.now() - started < 1000) {
        trouble = `Kubernetes ${k.what} watch closed at once without an event`;
      }
    } catch (e) {
      if (signal.aborted) break;
      if (e instanceof KubeApiError && e.status === 410) {
        needList = true;
        trouble = `Kubernetes ${k.what} watch expired (410 Gone): re-listing`;
      } else if (!(e instanceof WatchTimeoutError)) {
        trouble = `Kubernetes ${k.what} watch failed (${errText(e)})`;
      }
    }
    if (signal.aborted) break;
    if (trouble) await backoff.wait(trouble, signal);
  }
}
