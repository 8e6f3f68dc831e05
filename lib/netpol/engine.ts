/**
 * The enforcement engine: holds the cluster model, compiles this node's plan and keeps our nft table equal
 * to it. The first apply (and any repair) replaces the whole table in one transaction; every later change
 * is the one transaction of the difference between the applied plan and the new one (a diff the kernel
 * refuses falls back to the whole table). Until {@link NetpolEngine.sync} first runs — after the daemon
 * listed pods, namespaces and policies — the table a previous daemon left stays as it was, so a restart
 * opens no window in which selected pods are unprotected.
 *
 * Repair: {@link NetpolEngine.ensure} lists the table and compares it with the listing taken after the
 * last apply; a table that is gone (`nft flush ruleset`) or differs is rewritten whole.
 * @module
 */
import type { IPNet } from "../base/cidr.ts";
import { type Log, quietLog } from "../base/log.ts";
import { isNotFound, type NftDriver } from "../firewall/nft.ts";
import type { Cluster } from "./evaluate.ts";
import type { Namespace, Pod, Policy } from "./model.ts";
import { compile, type Plan } from "./plan.ts";
import { diffScript, fullScript, TABLE } from "./render.ts";

/** How a sync changed the table. */
export type SyncResult = "full" | "diff" | "none";

/** The engine's counters (for /metrics and status). */
export interface EngineStats {
  syncs: number;
  fullApplies: number;
  diffApplies: number;
  repairs: number;
  failures: number;
  /** Milliseconds the last apply took (compile + nft). */
  lastApplyMs: number;
}

/** Keeps our table equal to the plan of the current cluster model. */
export class NetpolEngine {
  /** The model: mutate through {@link setPod}, {@link setNamespace}, {@link setPolicy} or the maps. */
  readonly cluster: Cluster & {
    pods: Map<string, Pod>;
    namespaces: Map<string, Namespace>;
    policies: Map<string, Policy>;
  } = { pods: new Map(), namespaces: new Map(), policies: new Map() };
  readonly stats: EngineStats = {
    syncs: 0,
    fullApplies: 0,
    diffApplies: 0,
    repairs: 0,
    failures: 0,
    lastApplyMs: 0,
  };
  readonly #nft: NftDriver;
  readonly #log: Pick<Log, "info" | "warn">;
  #node: string;
  #podCidrs: readonly IPNet[];
  #applied: Plan | null = null;
  #listing: string | null = null;

  constructor(
    o: { nft: NftDriver; node: string; podCidrs: readonly IPNet[]; log?: Pick<Log, "info" | "warn"> },
  ) {
    this.#nft = o.nft;
    this.#node = o.node;
    this.#podCidrs = o.podCidrs;
    this.#log = o.log ?? quietLog;
  }

  /** This node's pod CIDRs changed (a new lease): the next sync uses them. */
  setPodCidrs(c: readonly IPNet[]): void {
    this.#podCidrs = c;
  }

  /** The plan last applied (null before the first sync). */
  get applied(): Plan | null {
    return this.#applied;
  }

  /** Sets (or with null removes) a pod by key. */
  setPod(key: string, p: Pod | null): void {
    if (p) this.cluster.pods.set(key, p);
    else this.cluster.pods.delete(key);
  }

  /** Sets (or removes) a namespace by name. */
  setNamespace(name: string, n: Namespace | null): void {
    if (n) this.cluster.namespaces.set(name, n);
    else this.cluster.namespaces.delete(name);
  }

  /** Sets (or removes) a policy by key. */
  setPolicy(key: string, p: Policy | null): void {
    if (p) this.cluster.policies.set(key, p);
    else this.cluster.policies.delete(key);
  }

  /** Compiles the plan and applies what changed: one nft transaction. */
  async sync(): Promise<SyncResult> {
    const t0 = performance.now();
    this.stats.syncs++;
    const plan = compile({ cluster: this.cluster, node: this.#node, podCidrs: this.#podCidrs });
    let result: SyncResult;
    if (this.#applied) {
      const d = diffScript(this.#applied, plan);
      if (!d) return "none";
      try {
        await this.#nft.run(d);
        this.stats.diffApplies++;
        result = "diff";
      } catch (e) {
        // The kernel's table is not what we applied (edited, or gone): replace it whole.
        this.#log.warn("netpol: the change was refused; rewriting the table", {
          error: (e as Error).message,
        });
        await this.#full(plan);
        result = "full";
      }
    } else {
      await this.#full(plan);
      result = "full";
    }
    this.#applied = plan;
    this.#listing = null;
    this.stats.lastApplyMs = Math.round(performance.now() - t0);
    return result;
  }

  async #full(plan: Plan): Promise<void> {
    try {
      await this.#nft.run(fullScript(plan));
    } catch (e) {
      this.stats.failures++;
      throw e;
    }
    this.stats.fullApplies++;
  }

  /**
   * Checks the table against the last apply and rewrites it whole when it is gone or differs. Returns true
   * when it repaired. Before the first sync there is nothing of ours to check.
   */
  async ensure(): Promise<boolean> {
    if (!this.#applied) return false;
    const list = `list table inet ${TABLE}\n`;
    const now = await this.#nft.run(list).catch((e) => {
      if (isNotFound(e)) return null;
      throw e;
    });
    if (now !== null && (this.#listing === null || now === this.#listing)) {
      this.#listing = now;
      return false;
    }
    this.#log.warn("netpol: our nft table drifted or is gone: rewriting it", { table: `inet ${TABLE}` });
    await this.#full(this.#applied);
    this.stats.repairs++;
    this.#listing = await this.#nft.run(list);
    return true;
  }
}

/** Removes our table (`flanctl reset`, or enforcement switched off); true when one was there. */
export async function removeNetpolTable(nft: NftDriver): Promise<boolean> {
  try {
    await nft.run(`delete table inet ${TABLE}\n`);
    return true;
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
}
