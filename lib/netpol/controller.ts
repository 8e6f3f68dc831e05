/**
 * NetworkPolicy enforcement in the daemon (`--network-policy`, kube mode): watches Pods, Namespaces and
 * NetworkPolicies ({@link watchKind}), keeps the engine's model, and syncs the table after each burst of
 * events (changes within {@link BATCH_MS} are one transaction). Nothing is applied before all three kinds
 * were listed once: until then the table a previous daemon left stays as it is.
 * @module
 */
import type { IPNet } from "../base/cidr.ts";
import { errText } from "../base/errors.ts";
import type { Log } from "../base/log.ts";
import { sleep } from "../base/sleep.ts";
import type { NftDriver } from "../firewall/nft.ts";
import type { KubeClient } from "../store/kube/kube_client.ts";
import { NetpolEngine } from "./engine.ts";
import {
  keyOf,
  type Namespace,
  NetpolModelError,
  parseNamespace,
  parsePod,
  parsePolicy,
  type Pod,
  type Policy,
} from "./model.ts";
import { type Kind, watchKind, type WatchUpdate } from "./watch.ts";

/** Events closer together than this are applied as one transaction. */
export const BATCH_MS = 20;

function projector<T>(parse: (raw: unknown) => T, key: (t: T) => string, onRefused: (msg: string) => void) {
  return (raw: unknown) => {
    try {
      const obj = parse(raw);
      return { key: key(obj), obj };
    } catch (e) {
      if (!(e instanceof NetpolModelError)) throw e;
      onRefused(e.message);
      return null;
    }
  };
}

/** The three watched kinds. */
export function kinds(onRefused: (msg: string) => void): {
  pods: Kind<Pod>;
  namespaces: Kind<Namespace>;
  policies: Kind<Policy>;
} {
  return {
    pods: { what: "pod", path: "/api/v1/pods", project: projector(parsePod, keyOf, onRefused) },
    namespaces: {
      what: "namespace",
      path: "/api/v1/namespaces",
      project: projector(parseNamespace, (n) => n.name, onRefused),
    },
    policies: {
      what: "networkpolicy",
      path: "/apis/networking.k8s.io/v1/networkpolicies",
      project: projector(parsePolicy, keyOf, onRefused),
    },
  };
}

/** Runs enforcement until `signal` aborts. */
export class NetpolController {
  readonly engine: NetpolEngine;
  readonly #client: KubeClient;
  readonly #log: Log;
  readonly #listed = new Set<string>();
  #dirty = false;
  #wake: (() => void) | null = null;
  #refusedSaid = new Set<string>();

  constructor(o: { client: KubeClient; nft: NftDriver; node: string; podCidrs: readonly IPNet[]; log: Log }) {
    this.#client = o.client;
    this.#log = o.log;
    this.engine = new NetpolEngine({ nft: o.nft, node: o.node, podCidrs: o.podCidrs, log: o.log });
  }

  /** True once all three kinds were listed and the table applied. */
  get enforcing(): boolean {
    return this.engine.applied !== null;
  }

  #refused = (msg: string) => {
    // Reported once per distinct reason (the text names no object content, only what was wrong).
    if (this.#refusedSaid.size > 100 || this.#refusedSaid.has(msg)) return;
    this.#refusedSaid.add(msg);
    this.#log.warn("netpol: an API object was refused", { reason: msg });
  };

  async #follow<T>(
    name: string,
    k: Kind<T>,
    set: (key: string, v: T | null) => void,
    clear: () => void,
    signal: AbortSignal,
  ) {
    for await (const u of watchKind(this.#client, k, signal, (line) => this.#log.warn(line))) {
      this.#apply(u, set, clear);
      this.#listed.add(name);
      this.#dirty = true;
      this.#wake?.();
    }
  }

  #apply<T>(u: WatchUpdate<T>, set: (key: string, v: T | null) => void, clear: () => void): void {
    if (u.type === "reset") {
      clear();
      for (const [k, v] of u.items) set(k, v);
    } else set(u.key, u.obj);
  }

  /** Watches and enforces until `signal` aborts; `ensureEveryMs` checks the table for drift. */
  async run(signal: AbortSignal, ensureEveryMs = 5000): Promise<void> {
    const e = this.engine, c = e.cluster;
    const k = kinds(this.#refused);
    const watches = [
      this.#follow("pods", k.pods, (key, v) => e.setPod(key, v), () => c.pods.clear(), signal),
      this.#follow(
        "namespaces",
        k.namespaces,
        (key, v) => e.setNamespace(key, v),
        () => c.namespaces.clear(),
        signal,
      ),
      this.#follow("policies", k.policies, (key, v) => e.setPolicy(key, v), () => c.policies.clear(), signal),
    ];
    let nextEnsure = Date.now() + ensureEveryMs;
    while (!signal.aborted) {
      const woke = new Promise<void>((r) => this.#wake = r);
      const left = Math.max(0, nextEnsure - Date.now());
      await Promise.race([woke, sleep(left, signal).catch(() => {})]);
      if (signal.aborted) break;
      if (this.#dirty && this.#listed.size === 3) {
        await sleep(BATCH_MS, signal).catch(() => {});
        this.#dirty = false;
        try {
          const first = e.applied === null;
          const r = await e.sync();
          if (first) {
            this.#log.info("netpol: enforcing", {
              policies: c.policies.size,
              pods: c.pods.size,
              namespaces: c.namespaces.size,
              ms: e.stats.lastApplyMs,
            });
          } else if (r !== "none") this.#log.debug("netpol: applied", { how: r, ms: e.stats.lastApplyMs });
        } catch (err) {
          this.#dirty = true;
          this.#log.warn("netpol: applying the rules failed; retrying", { error: errText(err) });
          await sleep(1000, signal).catch(() => {});
        }
      }
      if (Date.now() >= nextEnsure) {
        nextEnsure = Date.now() + ensureEveryMs;
        try {
          await e.ensure();
        } catch (err) {
          this.#log.warn("netpol: checking the table failed", { error: errText(err) });
        }
      }
    }
    await Promise.allSettled(watches);
  }
}
