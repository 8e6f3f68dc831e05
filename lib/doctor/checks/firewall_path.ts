/**
 * Firewall findings from the packet-path evaluator (lib/observe/packet_path): flannel's packets walked
 * through every base chain of the node's iptables-legacy, iptables-nft and native nft rulesets. A drop
 * is named with its back-end, table, chain and rule; the fix accepts the packet in the base chain that
 * dropped it with the tool that owns that chain (firewall-cmd for firewalld's table, ufw for ufw's
 * chains, nft for another native table, iptables-legacy / iptables-nft for the back-end's own), and the
 * persist lines name only files that exist here.
 * @module
 */
import type { Finding, FindingId, Severity } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import {
  type PathCheck,
  placeText,
  type Ruleset,
  type Step,
  stepText,
} from "../../observe/packet_path/mod.ts";
import { safeText } from "../../base/capped_read.ts";
import { sh, shellQuote } from "../../base/shell.ts";

/** What accepts one kind of packet, in each tool's words. */
export interface AcceptSpec {
  /** iptables match specs, one rule each (`-p udp --dport 8472`). */
  ipt: string[];
  /** nft match expressions, one rule each (`udp dport 8472`). */
  nft: string[];
  /** ufw commands (they apply now and persist). */
  ufw: string[];
  /** firewall-cmd runtime commands (persisted with --runtime-to-permanent). */
  firewalld: string[];
  /** A comment for the iptables rules. */
  comment: string;
}

/** True when `path` exists on this host (persist lines name only such paths). */
export type Exists = (path: string) => boolean;

/** The host's file check. */
export const hostExists: Exists = (path) => {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
};

/** ufw manages this iptables table: it holds ufw's chains. */
function ufwTable(rs: Ruleset, s: Step): boolean {
  const t = rs.tables.find((t) => t.backend === s.backend && t.family === s.family && t.name === s.table);
  return !!t && [...t.chains.keys()].some((c) => c.startsWith("ufw-") || c.startsWith("ufw6-"));
}

/** The iptables command for a back-end: plain `iptables` when it is the default one. */
function iptTool(ctx: NodeSnapshot, backend: string, family: string): string {
  const dflt = ctx.ipt.variant === "legacy" ? "iptables-legacy" : "iptables-nft";
  const base = family === "ip6" ? "ip6tables" : "iptables";
  return backend === dflt ? base : `${base}${backend.slice("iptables".length)}`;
}

/** Fix and persist lines that accept `spec` in the base chain `s` dropped it in. */
export function acceptFix(
  ctx: NodeSnapshot,
  rs: Ruleset,
  s: Step,
  spec: AcceptSpec,
  exists: Exists = hostExists,
): { fix: string[]; persist: string[] } {
  if (s.backend === "nftables" && s.family === "inet" && s.table === "firewalld") {
    return {
      fix: spec.firewalld.map((c) => ctx.cmd(c)),
      persist: [ctx.cmd("firewall-cmd --runtime-to-permanent")],
    };
  }
  if (s.backend === "nftables") {
    const conf = ["/etc/nftables.conf", "/etc/sysconfig/nftables.conf"].find(exists);
    return {
      fix: spec.nft.map((m) =>
        ctx.cmd(`nft insert rule ${sh`${s.family} ${s.table} ${s.chain}`} ${m} accept`)
      ),
      persist: [
        `add the same rule at the top of chain ${safeText(s.chain, 60)} of table ${s.family} ` +
        `${safeText(s.table, 60)} in ${conf ?? "the file your nftables service loads"}`,
      ],
    };
  }
  if (ufwTable(rs, s)) {
    return { fix: spec.ufw.map((c) => ctx.cmd(c)), persist: ["ufw keeps its rules across reboots"] };
  }
  const tool = iptTool(ctx, s.backend, s.family);
  const t = s.table === "filter" ? "" : sh`-t ${s.table} `;
  const fix = spec.ipt.map((m) =>
    ctx.cmd(
      `${tool} ${t}${sh`-I ${s.chain} 1`} ${m} -m comment --comment ${shellQuote(spec.comment)} -j ACCEPT`,
    )
  );
  const v6 = s.family === "ip6";
  const files: [string, string][] = [
    [v6 ? "/etc/sysconfig/ip6tables" : "/etc/sysconfig/iptables", "iptables-services"],
    [v6 ? "/etc/iptables/rules.v6" : "/etc/iptables/rules.v4", "netfilter-persistent"],
  ];
  const persist = files.filter(([f]) => exists(f)).map(([f, who]) => `${tool}-save > ${f}  # ${who}`);
  if (!persist.length) persist.push("add the rule where this host's firewall rules are loaded from at boot");
  return { fix, persist };
}

/**
 * One finding for a set of walked packets: critical naming the rule that drops (grouped by rule), unknown
 * with the reason when the walk cannot tell, else ok saying what was crossed.
 */
export function pathFinding(
  ctx: NodeSnapshot,
  id: FindingId,
  rs: Ruleset,
  checks: PathCheck[],
  spec: AcceptSpec,
  why: string,
  exists: Exists = hostExists,
): Finding {
  if (!checks.length) {
    return { id, severity: "ok", detail: "no peer or pod network known: no packet to walk" };
  }
  const unread = rs.unread.length ? ` (not read: ${rs.unread.map((u) => safeText(u, 120)).join("; ")})` : "";
  const drops = checks.filter((c) => c.verdict.verdict === "drop" && c.verdict.dropped);
  if (drops.length) {
    const byPlace = new Map<string, { step: Step; labels: string[] }>();
    for (const c of drops) {
      const s = c.verdict.dropped!;
      const k = `${placeText(s)} ${s.hook}`;
      const e = byPlace.get(k) ?? { step: s, labels: [] };
      e.labels.push(c.label);
      byPlace.set(k, e);
    }
    const fix: string[] = [];
    const persist: string[] = [];
    for (const { step } of byPlace.values()) {
      const f = acceptFix(ctx, rs, step, spec, exists);
      fix.push(...f.fix);
      persist.push(...f.persist);
    }
    const detail = [...byPlace.values()].map(({ step, labels }) =>
      `${
        labels.length > 3
          ? `${labels.slice(0, 3).join(", ")} and ${labels.length - 3} more`
          : labels.join(", ")
      }: ` +
      `dropped at ${step.hook.toUpperCase()} by ${stepText(step)}`
    ).join("; ");
    return { id, severity: "critical", detail, why, fix: [...new Set(fix)], persist: [...new Set(persist)] };
  }
  const unknown = checks.find((c) => c.verdict.verdict === "unknown");
  if (unknown) {
    const sev: Severity = "unknown";
    return {
      id,
      severity: sev,
      detail: `${unknown.label}: cannot tell whether the firewall passes it: ` +
        `${safeText(unknown.verdict.reason ?? "unknown", 200)}${unread}`,
      fix: [],
    };
  }
  const chains = new Set(
    checks.flatMap((c) => c.verdict.steps.filter((s) => s.verdict !== "skipped").map(placeText)),
  );
  const what = checks.length === 1 ? checks[0].label : `${checks[0].label} (and ${checks.length - 1} more)`;
  return {
    id,
    severity: "ok",
    detail: `${what}: passes the firewall (${chains.size} base chain${
      chains.size === 1 ? "" : "s"
    } crossed)${unread}`,
  };
}
