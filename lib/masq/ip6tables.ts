/**
 * flannel's IPv6 masquerade and forward rules (ip6tables mode): the same chains and lines as IPv4 with the
 * IPv6 network, our IPv6 subnet and ff00::/8 as the multicast range (flanneld's masqIP6Rules and its IPv6
 * forward rules), kept by a {@link RuleManager} that runs ip6tables-save/ip6tables-restore. Kept apart from
 * the IPv4 tables so a firewall layer can take both over as they are.
 * @module
 */
import type { IPNet } from "../ip/cidr.ts";
import { RuleManager, type Runner } from "./iptables.ts";
import { forwardRules, masqRules, type TableRules } from "./rules.ts";

/** The IPv6 tools (same syntax as iptables-save/iptables-restore). */
export const IP6TABLES_SAVE = "ip6tables-save";
/** See {@link IP6TABLES_SAVE}. */
export const IP6TABLES_RESTORE = "ip6tables-restore";

/** The IPv6 tables for `network6` (IPv6Network) and `subnet6` (our IPv6 subnet), as the flags ask. */
export function ipv6RuleTables(
  network6: IPNet,
  subnet6: IPNet,
  o: { ipMasq: boolean; forwardRules: boolean },
): TableRules[] {
  if (network6.family !== 6 || subnet6.family !== 6) {
    throw new TypeError(`ipv6RuleTables: ${network6} / ${subnet6} are not IPv6 prefixes`);
  }
  const t: TableRules[] = [];
  if (o.ipMasq) t.push(masqRules(network6, subnet6));
  if (o.forwardRules) t.push(forwardRules(network6));
  return t;
}

/** A rule manager for the IPv6 tables (ip6tables-save / ip6tables-restore). */
export function ipv6RuleManager(tables: TableRules[], run?: Runner): RuleManager {
  return new RuleManager(tables, { run, save: IP6TABLES_SAVE, restore: IP6TABLES_RESTORE });
}
