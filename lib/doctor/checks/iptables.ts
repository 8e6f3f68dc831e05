/**
 * iptables: FORWARD policy vs flannel's forward rules, the masquerade chain, mixed legacy/nft rule sets.
 * Works on `iptables-save` text of the checked namespace.
 * @module
 */
import type { Check, CheckId, Finding } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { IPNet } from "../../base/cidr.ts";
import { masqRules as flannelMasq } from "../../firewall/masq_rules.ts";
import { chainPolicy, chainRules } from "../../observe/probes.ts";
import { shellQuote } from "../../base/shell.ts";

/** True when the chain exists (declared) in the table. */
function chainExists(table: string, chain: string): boolean {
  return new RegExp(`^:${chain} `, "m").test(table);
}

/** The rules flannel's masquerade chain must contain (docs/daemon.md, "Masquerade"), for network/subnet. */
export function expectedMasq(network: string, subnet: string): string[] {
  return flannelMasq(IPNet.parse(network), IPNet.parse(subnet)).rules;
}

function noIptables(ctx: NodeSnapshot, id: CheckId): Finding | null {
  // In nftables mode the FORWARD policy still matters (a drop in any base chain drops the packet, whatever
  // flannel's nft forward chain accepts), so forward-policy reads iptables in both modes.
  if (ctx.store.config?.enableNFTables && id !== "forward-policy") {
    // nftables mode: the nft-rules check reads flannel's tables (lib/doctor/checks/nftables.ts).
    return ok(
      id,
      "EnableNFTables is set: flannel's rules are the nft tables flannel-ipv4/-ipv6 (see nft-rules)",
    );
  }
  if (ctx.ipt.main.text === null) return unknown(id, `cannot run iptables-save: ${ctx.ipt.main.error}`);
  return null;
}

/** forward-policy: FORWARD DROP without ACCEPT rules for the pod network drops inter-node traffic. */
export const forwardPolicy: Check = {
  id: "forward-policy",
  title: "FORWARD chain lets pod traffic through",
  run(ctx) {
    const bad = noIptables(ctx, "forward-policy");
    if (bad) return [bad];
    return [forwardFinding(ctx, ctx.iptTable("filter"), ctx.network?.toString(), "iptables")];
  },
};

/**
 * The forward-policy verdict for one family: `filter` is that family's iptables-save filter table,
 * `net` its pod network, `tool` the command of its fixes (iptables / ip6tables). Shared with the
 * IPv6 walk of `flanctl trace`.
 */
export function forwardFinding(
  ctx: NodeSnapshot,
  filter: string,
  net: string | undefined,
  tool: "iptables" | "ip6tables",
): Finding {
  const policy = chainPolicy(filter, "FORWARD") ?? "ACCEPT";
  if (policy === "ACCEPT") return ok("forward-policy", "FORWARD policy ACCEPT");
  if (!net) {
    return unknown("forward-policy", `FORWARD policy ${policy}; pod network unknown (no subnet.env/store)`);
  }
  const fwd = chainRules(filter, "FORWARD");
  const jumps = fwd.some((r) => / -j FLANNEL-FWD\b/.test(r));
  const fl = chainRules(filter, "FLANNEL-FWD");
  const has = (rules: string[], dir: "s" | "d") =>
    rules.some((r) => r.includes(`-${dir} ${net} `) && / -j ACCEPT\b/.test(r) && !r.includes(`! -${dir}`));
  const okFl = jumps && has(fl, "s") && has(fl, "d");
  const okDirect = has(fwd, "s") && has(fwd, "d");
  if (okFl || okDirect) {
    return ok(
      "forward-policy",
      `FORWARD policy ${policy}, pod network ${net} accepted (${okFl ? "FLANNEL-FWD" : "FORWARD"})`,
    );
  }
  const seen = !jumps
    ? "no jump to FLANNEL-FWD"
    : `FLANNEL-FWD has ${fl.length} rule(s) without -s/-d ${net} ACCEPT`;
  const c = `-m comment --comment "flanneld forward"`;
  return {
    id: "forward-policy",
    severity: "critical",
    detail: `FORWARD policy ${policy} and ${seen}`,
    why: "pod traffic to and from other nodes is forwarded and dropped by the policy (flannel #609, " +
      "kubernetes #40182; Docker sets FORWARD DROP)",
    fix: [
      ctx.cmd(`${tool} -N FLANNEL-FWD`) + " 2>/dev/null; true",
      ctx.cmd(`${tool} -A FLANNEL-FWD -s ${shellQuote(String(net))} ${c} -j ACCEPT`),
      ctx.cmd(`${tool} -A FLANNEL-FWD -d ${shellQuote(String(net))} ${c} -j ACCEPT`),
      ctx.cmd(`${tool} -A FORWARD ${c} -j FLANNEL-FWD`),
    ],
    persist: [
      "run the daemon with forward rules enabled (flanneld --iptables-forward-rules=true, the default); " +
      "it re-creates FLANNEL-FWD every 5 s",
    ],
  };
}

/** masq-rules: FLANNEL_IPMASQ=true needs FLANNEL-POSTRTG, jumped to from POSTROUTING. */
export const masqRules: Check = {
  id: "masq-rules",
  title: "Masquerade chain present when FLANNEL_IPMASQ=true",
  run(ctx) {
    if (!ctx.subnetEnv) return [unknown("masq-rules", `subnet.env unavailable: ${ctx.subnetEnvError}`)];
    if (!ctx.subnetEnv.ipMasq) return [ok("masq-rules", "FLANNEL_IPMASQ=false: the CNI bridge masquerades")];
    const bad = noIptables(ctx, "masq-rules");
    if (bad) return [bad];
    const nat = ctx.iptTable("nat");
    const net = ctx.subnetEnv.network?.toString();
    const sub = ctx.subnetEnv.subnet?.net.toString();
    if ((!net || !sub) && ctx.ipv4Disabled) {
      return [ok("masq-rules", "IPv4 disabled (IPv6: see ip6tables-masq)")];
    }
    if (!net || !sub) return [unknown("masq-rules", "subnet.env has no IPv4 network")];
    const jump = chainRules(nat, "POSTROUTING").some((r) => / -j FLANNEL-POSTRTG\b/.test(r));
    const exists = chainExists(nat, "FLANNEL-POSTRTG");
    const want = expectedMasq(net, sub);
    const have = new Set(chainRules(nat, "FLANNEL-POSTRTG"));
    const missing = want.filter((r) => !have.has(r));
    if (jump && missing.length === 0) {
      return [
        ok("masq-rules", `FLANNEL-POSTRTG has the ${want.length} masquerade rules for ${sub} in ${net}`),
      ];
    }
    const problems: string[] = [];
    if (!exists) problems.push("chain FLANNEL-POSTRTG does not exist in the nat table");
    if (!jump) problems.push("POSTROUTING has no jump to FLANNEL-POSTRTG");
    if (exists && missing.length) {
      problems.push(`FLANNEL-POSTRTG lacks ${missing.length} rule(s): ${missing.join(" | ")}`);
    }
    return [{
      id: "masq-rules",
      severity: !exists || !jump ? "critical" : "warning",
      detail: `FLANNEL_IPMASQ=true but ${problems.join("; ")}`,
      why: "pods reach nothing outside the pod network (no SNAT), or traffic between pods is masqueraded " +
        "(flannel #799, #1450)",
      fix: [
        ...(exists ? [] : [ctx.cmd("iptables -t nat -N FLANNEL-POSTRTG")]),
        ...missing.map((r) => ctx.cmd(`iptables -t nat ${r}`)),
        ...(jump ? [] : [
          ctx.cmd(`iptables -t nat -A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG`),
        ]),
      ],
      persist: ["restart the daemon with --ip-masq; it re-creates the chain every --iptables-resync seconds"],
    }];
  },
};

function ruleCount(text: string | null): number {
  return (text ?? "").split("\n").filter((l) => l.startsWith("-A ")).length;
}

/** iptables-backend: rules in both the legacy and the nf_tables back-end (flannel #1317). */
export const iptablesMixed: Check = {
  id: "iptables-backend",
  title: "iptables rules in one back-end only",
  run(ctx) {
    const { legacy, nft, variant } = ctx.ipt;
    if (legacy.text === null && nft.text === null) {
      return [unknown("iptables-backend", "neither iptables-legacy-save nor iptables-nft-save is installed")];
    }
    const l = ruleCount(legacy.text), n = ruleCount(nft.text);
    const detail = `iptables-legacy: ${l} rule(s), iptables-nft: ${n} rule(s); iptables is ${
      variant ?? "unknown"
    }`;
    if (l === 0 || n === 0) return [ok("iptables-backend", detail)];
    const flannelIn = (t: string | null) => /FLANNEL-(POSTRTG|FWD)/.test(t ?? "");
    const where = [flannelIn(legacy.text) ? "legacy" : "", flannelIn(nft.text) ? "nft" : ""].filter(Boolean);
    const stray = variant === "legacy" ? "nft" : "legacy";
    return [{
      id: "iptables-backend",
      severity: "warning",
      detail: `${detail}; flannel chains in: ${where.join(", ") || "none"}`,
      why:
        "packets traverse both rule sets; rules written by one tool (kube-proxy, flannel, docker) can be " +
        "shadowed by the other's FORWARD/NAT rules (flannel #1317, #2145)",
      fix: [
        `inspect both: ${ctx.cmd("iptables-legacy-save")}; ${ctx.cmd("iptables-nft-save")}`,
        `remove the ${stray} rules after checking no component still uses them: ` +
        ctx.cmd(`iptables-${stray}-save`) + " | grep -c -- '-A'",
      ],
      persist: [
        `make every component use one back-end: update-alternatives --set iptables /usr/sbin/iptables-${
          variant ?? "nft"
        }`,
      ],
    }];
  },
};

/** The checks of this family. */
export const IPTABLES_CHECKS: Check[] = [forwardPolicy, masqRules, iptablesMixed];
