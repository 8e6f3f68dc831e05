/**
 * The firewall a packet meets, read from the node snapshot (read-only: the dumps the snapshot already
 * took): iptables-legacy's tables (iptables-legacy-save), iptables-nft's (iptables-nft-save; their nft
 * tables are left out of the native listing, which shows their xt matches only as opaque blobs), and
 * every native nft table of `nft -j list ruleset` (firewalld's inet firewalld, flannel's flannel-ipv4,
 * an operator's inet filter, …). IPv6: ip6tables-save of the default back-end and the native tables.
 * @module
 */
import type { NodeSnapshot } from "../snapshot.ts";
import type { Backend, Table } from "./types.ts";
import { parseIptSave } from "./ipt_parse.ts";
import { parseNftJson } from "./nft_parse.ts";

/** The tables a walk crosses, and what could not be read (named in reports, never guessed). */
export interface Ruleset {
  family: 4 | 6;
  tables: Table[];
  /** Sources that could not be read or parsed, with why. */
  unread: string[];
}

/** What the reader needs of a snapshot: its dumps (tests build it by hand). */
export interface FirewallDumps {
  legacy: string | null;
  nft: string | null;
  /** iptables-save of the default back-end (used when neither flavour's own save ran). */
  main: string | null;
  /** The default back-end ("nf_tables" or "legacy"), or null. */
  variant: string | null;
  ip6: string | null;
  nftJson: unknown;
  nftError: string | null;
}

/** The dumps of a snapshot. */
export function dumpsOf(ctx: NodeSnapshot): FirewallDumps {
  return {
    legacy: ctx.ipt.legacy.text,
    nft: ctx.ipt.nft.text,
    main: ctx.ipt.main.text,
    variant: ctx.ipt.variant,
    ip6: ctx.ip6t.text,
    nftJson: ctx.nftRuleset.json,
    nftError: ctx.nftRuleset.json ? null : ctx.nftRuleset.error ?? "no JSON listing",
  };
}

/** iptables-nft owns these nft tables when its save listed them. */
const IPT_TABLES = new Set(["filter", "nat", "mangle", "raw", "security"]);

/** The tables of one family. */
export function readRuleset(d: FirewallDumps, family: 4 | 6): Ruleset {
  const tables: Table[] = [];
  const unread: string[] = [];
  const owned = new Set<string>();
  const add = (text: string, backend: Backend, fam: 4 | 6) => {
    const r = parseIptSave(text, backend, fam);
    tables.push(...r.tables);
    if (r.error) unread.push(`${backend}: ${r.error}`);
    if (backend === "iptables-nft") { for (const t of r.tables) owned.add(`${t.family} ${t.name}`); }
  };
  const mainBackend: Backend = d.variant === "legacy" ? "iptables-legacy" : "iptables-nft";
  if (family === 4) {
    if (d.legacy !== null) add(d.legacy, "iptables-legacy", 4);
    if (d.nft !== null) add(d.nft, "iptables-nft", 4);
    if (d.legacy === null && d.nft === null && d.main !== null) add(d.main, mainBackend, 4);
    if (d.legacy === null && d.nft === null && d.main === null) unread.push("iptables: no iptables-save ran");
  } else if (d.ip6 !== null) add(d.ip6, mainBackend, 6);
  else unread.push("ip6tables: ip6tables-save did not run");
  if (d.nftJson) {
    tables.push(...parseNftJson(d.nftJson, (f, n) => IPT_TABLES.has(n) && owned.has(`${f} ${n}`)));
  } else unread.push(`nftables: ${d.nftError ?? "not listed"}`);
  return { family, tables, unread };
}
