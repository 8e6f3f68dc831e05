/**
 * flannel's own rules in either mode, kept in place by the daemon. iptables mode: chains FLANNEL-POSTRTG
 * (nat) and FLANNEL-FWD (filter), lines as flanneld's iptables mode makes them (lib/firewall/masq_rules.ts).
 * nftables mode: tables `ip flannel-ipv4` and `ip6 flannel-ipv6` (both created, as flanneld does), chain
 * `postrtg` (nat, postrouting, srcnat) with the masquerade rules and chain `forward` (filter, forward,
 * filter) with the accepts — the same tables, chains, comments and rules as flanneld's
 * pkg/trafficmngr/nftables, each family applied as one transaction that adds the table and chains,
 * flushes our chains and refills them. Starting in one mode removes the other mode's flannel rules.
 *
 * Repair (an improvement: flanneld programs its nft tables once): after applying, the table's listing is
 * remembered; every resync lists it again and re-applies the family's transaction when it differs or the
 * table is gone. Comparing with our own listing keeps this independent of how an nft version prints rules.
 * @module
 */
import { releaseNftLibrary } from "../os/mod.ts";
import type { IPNet } from "../base/cidr.ts";
import { forwardRules, masqRules, type TableRules } from "./masq_rules.ts";
import { Iptables, RuleManager } from "./iptables.ts";
import { isNotFound, type NftDriver, nftDriver } from "./nft.ts";
import { type Family, FirewallError, type FirewallMode, type Runner } from "./types.ts";
import { type Log, quietLog } from "../base/log.ts";

/** flanneld's nft table names. */
export const NFT_TABLES: Record<Family, { family: "ip" | "ip6"; name: string }> = {
  4: { family: "ip", name: "flannel-ipv4" },
  6: { family: "ip6", name: "flannel-ipv6" },
};

/** What flannel's rules are built from. */
export interface FlannelRuleSpec {
  /** --ip-masq. */
  ipMasq: boolean;
  /** --iptables-forward-rules. */
  forward: boolean;
  /** IPv4 cluster network and our subnet (null: no IPv4). */
  network: IPNet | null;
  subnet: IPNet | null;
  /** IPv6 cluster network and our subnet (absent/null: no IPv6). */
  ipv6Network?: IPNet | null;
  ipv6Subnet?: IPNet | null;
  /** Masquerade with fully-random port selection (default true). */
  randomFully?: boolean;
}

/** flannel's iptables chains for `spec`, both families. */
export function iptablesRules(spec: FlannelRuleSpec): TableRules[] {
  const t: TableRules[] = [];
  const opts = { randomFully: spec.randomFully };
  for (const [n, s] of [[spec.network, spec.subnet], [spec.ipv6Network, spec.ipv6Subnet]] as const) {
    if (!n) continue;
    if (spec.ipMasq && s) t.push(masqRules(n, s, opts));
    if (spec.forward) t.push(forwardRules(n));
  }
  return t;
}

/** The nft transaction for one family (always at least the table, as flanneld's Init creates both). */
export function nftFamilyScript(spec: FlannelRuleSpec, fam: Family): string {
  const { family: f, name } = NFT_TABLES[fam];
  const network = fam === 4 ? spec.network : spec.ipv6Network ?? null;
  const subnet = fam === 4 ? spec.subnet : spec.ipv6Subnet ?? null;
  const out = [`add table ${f} ${name} { comment "rules for ${name}" ; }`];
  const rule = (chain: string, r: string) => out.push(`add rule ${f} ${name} ${chain} ${r}`);
  if (network && subnet && spec.ipMasq) {
    const masq = spec.randomFully === false ? "masquerade" : "masquerade fully-random";
    const mcast = fam === 4 ? "224.0.0.0/4" : "ff00::/8";
    out.push(
      `add chain ${f} ${name} postrtg { type nat hook postrouting priority srcnat ; comment "chain to manage traffic masquerading by flannel" ; }`,
      `flush chain ${f} ${name} postrtg`,
    );
    rule("postrtg", "meta mark 0x4000 return");
    rule("postrtg", `${f} saddr ${subnet} ${f} daddr ${network} return`);
    rule("postrtg", `${f} saddr ${network} ${f} daddr ${subnet} return`);
    rule("postrtg", `${f} saddr != ${subnet} ${f} daddr ${network} return`);
    rule("postrtg", `${f} saddr ${network} ${f} daddr != ${mcast} ${masq}`);
    rule("postrtg", `${f} saddr != ${network} ${f} daddr ${network} ${masq}`);
  }
  if (network && spec.forward) {
    out.push(
      `add chain ${f} ${name} forward { type filter hook forward priority filter ; comment "chain to accept flannel traffic" ; }`,
      `flush chain ${f} ${name} forward`,
    );
    rule("forward", `${f} saddr ${network} accept`);
    rule("forward", `${f} daddr ${network} accept`);
  }
  return out.join("\n") + "\n";
}

/** flanneld's chains in its nft tables: all that iptables mode removes of them. */
export const NFT_CHAINS: readonly string[] = ["postrtg", "forward"];

/**
 * The top-level objects of a `list table` text listing (nft prints each at one tab's indent, as
 * `chain NAME {`, `set NAME {`, `map NAME {`, …): the chains' names and every other object.
 */
export function nftTableObjects(listing: string): { chains: string[]; others: string[] } {
  const chains: string[] = [], others: string[] = [];
  for (const l of listing.split("\n")) {
    const m = /^\t(\S.*) \{$/.exec(l);
    if (!m) continue;
    if (m[1].startsWith("chain ")) chains.push(m[1].slice(6));
    else others.push(m[1]);
  }
  return { chains, others };
}

/**
 * The nft text that removes flannel's own chains from one of its tables, given the table's listing, and
 * the table itself when nothing else is left in it (another program's chains, sets or maps stay, with the
 * table). Empty when there is nothing of ours to remove.
 */
export function nftCleanupScript(family: string, name: string, listing: string): string {
  const { chains, others } = nftTableObjects(listing);
  const ours = chains.filter((c) => NFT_CHAINS.includes(c));
  if (ours.length === chains.length && others.length === 0) return `delete table ${family} ${name}\n`;
  return ours.map((c) => `delete chain ${family} ${name} ${c}\n`).join("");
}

/** Keeps flannel's rules in place in one mode and removes the other mode's. */
export class FlannelRules {
  readonly mode: FirewallMode;
  #spec: FlannelRuleSpec | null = null;
  readonly #ipt: RuleManager;
  readonly #run?: Runner;
  readonly #log: Pick<Log, "info" | "warn">;
  #nft: NftDriver | null;
  /** Last listing of each nft table after we applied it. */
  readonly #seen = new Map<Family, string>();

  constructor(
    mode: FirewallMode,
    opts: { run?: Runner; log?: Pick<Log, "info" | "warn">; nft?: NftDriver } = {},
  ) {
    this.mode = mode;
    this.#run = opts.run;
    this.#log = opts.log ?? quietLog;
    this.#ipt = new RuleManager([], { run: opts.run });
    this.#nft = opts.nft ?? null;
  }

  #driver(): NftDriver {
    return this.#nft ??= nftDriver({ log: this.#log, run: this.#run });
  }

  /** Sets the wanted rules (startup, or our subnet changed); the next ensure applies them. */
  set(spec: FlannelRuleSpec): void {
    this.#spec = spec;
    this.#ipt.setTables(this.mode === "iptables" ? iptablesRules(spec) : []);
    this.#seen.clear();
  }

  /** True when there is nothing to manage. */
  get empty(): boolean {
    return !this.#spec || (!this.#spec.ipMasq && !this.#spec.forward);
  }

  /** Throws {@link FirewallError} when this mode's tools cannot run. */
  async probe(): Promise<void> {
    if (this.empty) return;
    if (this.mode === "iptables") return await this.#ipt.probe();
    await this.#driver().run("list tables\n");
  }

  /**
   * Removes the other mode's flannel rules (iptables mode: chains postrtg and forward of the flannel-ipv4/-ipv6
   * tables, and a table once nothing else is in it — another program's chains, sets or maps there stay;
   * nftables mode:
   * FLANNEL-POSTRTG and FLANNEL-FWD with their jumps, both families). A missing tool means there is nothing
   * of that kind to remove. Returns what was removed.
   */
  async cleanupOtherMode(): Promise<string[]> {
    const removed: string[] = [];
    if (this.mode === "iptables") {
      try {
        let listing: string;
        try {
          listing = await this.#driver().run("list tables\n");
        } catch (e) {
          if (e instanceof FirewallError && e.missing) return removed;
          throw e;
        }
        const present = Object.values(NFT_TABLES).filter(({ family, name }) =>
          listing.split("\n").some((l) => l.trim() === `table ${family} ${name}`)
        );
        for (const { family, name } of present) {
          const table = await this.#driver().run(`list table ${family} ${name}\n`).catch((e) => {
            if (isNotFound(e)) return null;
            throw e;
          });
          if (table === null) continue;
          const script = nftCleanupScript(family, name, table);
          if (!script) continue;
          await this.#driver().run(script);
          if (script.startsWith("delete table")) removed.push(`${family} ${name}`);
          else {
            const kept = nftTableObjects(table);
            for (const c of kept.chains.filter((c) => NFT_CHAINS.includes(c))) {
              removed.push(`${family} ${name} ${c}`);
            }
            this.#log.warn("nftables: kept a flannel table holding objects that are not flannel's", {
              table: `${family} ${name}`,
              kept: [
                ...kept.chains.filter((c) => !NFT_CHAINS.includes(c)).map((c) => `chain ${c}`),
                ...kept.others,
              ]
                .join(", "),
            });
          }
        }
        return removed;
      } finally {
        // iptables mode needs nftables only for this: unmap libnftables (and its libraries).
        releaseNftLibrary();
      }
    }
    for (const fam of [4, 6] as const) {
      const ipt = new Iptables(fam, { run: this.#run });
      for (const [table, chain] of [["nat", "FLANNEL-POSTRTG"], ["filter", "FLANNEL-FWD"]]) {
        try {
          for (const c of await ipt.removeChains(table, [chain])) {
            removed.push(`${fam === 4 ? "iptables" : "ip6tables"} ${table} ${c}`);
          }
        } catch (e) {
          if (e instanceof FirewallError) {
            if (!e.missing) this.#log.warn("could not remove iptables rules", { error: e.message });
            break;
          }
          throw e;
        }
      }
    }
    return removed;
  }

  /**
   * Applies one family's transaction. As flanneld (which probes first), a kernel refusing `masquerade
   * fully-random` gets plain `masquerade`: the refused transaction changed nothing, so it is retried once
   * without it and the choice kept.
   */
  async #applyNft(nft: NftDriver, fam: Family): Promise<void> {
    const spec = this.#spec!;
    try {
      await nft.run(nftFamilyScript(spec, fam));
    } catch (e) {
      if (!(e instanceof FirewallError) || spec.randomFully === false || !spec.ipMasq) throw e;
      await nft.run(nftFamilyScript({ ...spec, randomFully: false }, fam));
      this.#spec = { ...spec, randomFully: false };
      this.#log.warn("nftables: masquerade fully-random refused by the kernel; using masquerade", {
        table: NFT_TABLES[fam].name,
      });
    }
  }

  /** Checks the rules and re-applies what drifted. Returns what was (re)applied (empty: all fine). */
  async ensure(): Promise<string[]> {
    if (this.empty || !this.#spec) return [];
    if (this.mode === "iptables") return await this.#ipt.ensure();
    const fixed: string[] = [];
    const nft = this.#driver();
    for (const fam of [4, 6] as const) {
      const { family, name } = NFT_TABLES[fam];
      const list = `list table ${family} ${name}\n`;
      const before = this.#seen.get(fam);
      if (before !== undefined) {
        const now = await nft.run(list).catch((e) => {
          if (isNotFound(e)) return null;
          throw e;
        });
        if (now === before) continue;
      }
      await this.#applyNft(nft, fam);
      this.#seen.set(fam, await nft.run(list));
      fixed.push(`${family} ${name}`);
    }
    return fixed;
  }
}
