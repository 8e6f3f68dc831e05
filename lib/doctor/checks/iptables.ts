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
import { sh, shellQuote } from "../../base/shell.ts";
import {
  type PathCheck,
  placeText,
  podForward,
  podForward6,
  podOutside,
  type Ruleset,
  ruleset4,
  ruleset6,
  stepText,
} from "../../observe/packet_path/mod.ts";
import { network6 } from "../../observe/probes.ts";
import { type AcceptSpec, hostExists, pathFinding } from "./firewall_path.ts";

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

/** What accepts pod traffic of network `n` in FORWARD, in each tool's words. */
export function forwardAccept(n: string, family: 4 | 6 = 4): AcceptSpec {
  const ip = family === 4 ? "ip" : "ip6";
  return {
    ipt: [sh`-s ${n}`, sh`-d ${n}`],
    nft: [`${ip} ${sh`saddr ${n}`}`, `${ip} ${sh`daddr ${n}`}`],
    ufw: [sh`ufw route allow from ${n}`, sh`ufw route allow to ${n}`],
    firewalld: [sh`firewall-cmd --zone=trusted --add-source=${n}`],
    comment: "flannel forward",
  };
}

/** Why a FORWARD drop matters. */
export const FORWARD_WHY =
  "pod traffic to and from other nodes is forwarded, and dropped there (flannel #609, kubernetes #40182; " +
  "Docker sets FORWARD DROP; RHEL's iptables-services rejects in FORWARD before flannel's jump, flannel #1033)";

/**
 * forward-policy: a pod → remote pod packet and its answer (a new TCP connection each way between cni0
 * and the overlay device) walked through every FORWARD base chain of every back-end: the first rule (or
 * policy) that drops it, named.
 */
export const forwardPolicy: Check = {
  id: "forward-policy",
  title: "FORWARD lets pod traffic through",
  run(ctx) {
    const net6 = network6(ctx);
    const v6 = net6 ? forward6Finding(ctx, net6) : null;
    if (ctx.ipv4Disabled) {
      return [v6 ?? unknown("forward-policy", "IPv6 pod network unknown (no subnet.env/store)")];
    }
    const v4 = forward4Finding(ctx);
    if (!v6) return [v4];
    const bad = [v4, v6].filter((f) => f.severity !== "ok");
    if (bad.length) return bad;
    return [{ ...v4, detail: `${v4.detail}; IPv6: ${v6.detail}` }];
  },
};

/**
 * forward-policy for IPv6: the IPv6 pod → remote pod packet and its answer walked through every FORWARD
 * base chain of the IPv6 rulesets (ip6tables-legacy, ip6tables-nft, native ip6/inet tables).
 */
function forward6Finding(ctx: NodeSnapshot, net6: IPNet): Finding {
  const rs = ruleset6(ctx);
  const checks = podForward6(ctx, rs);
  if (!checks.length) {
    return unknown("forward-policy", "no IPv6 subnet of this node known (subnet.env/lease)");
  }
  return withFlannelFwd(
    pathFinding(ctx, "forward-policy", rs, checks, forwardAccept(String(net6), 6), FORWARD_WHY),
    rs,
    checks,
  );
}

/** forward-policy for IPv4 (see {@link forwardPolicy}). */
function forward4Finding(ctx: NodeSnapshot): Finding {
  const net = ctx.network;
  if (!net) return unknown("forward-policy", "pod network unknown (no subnet.env/store)");
  const rs = ruleset4(ctx);
  const checks = podForward(ctx, rs);
  if (!checks.length) return unknown("forward-policy", "no subnet of this node known (subnet.env/lease)");
  return withFlannelFwd(
    pathFinding(ctx, "forward-policy", rs, checks, forwardAccept(String(net)), FORWARD_WHY),
    rs,
    checks,
  );
}

/** A FORWARD drop: which back-end's FORWARD lacks flannel's jump, and why only an earlier rule helps. */
function withFlannelFwd(f: Finding, rs: Ruleset, checks: PathCheck[]): Finding {
  if (f.severity !== "critical") return f;
  const noJump = rs.tables.filter((t) =>
    t.backend !== "nftables" && t.name === "filter" &&
    checks.some((c) => c.verdict.dropped?.backend === t.backend && c.verdict.dropped.table === "filter") &&
    !(t.chains.get("FORWARD")?.rules ?? []).some((r) =>
      r.action.kind === "jump" && r.action.chain === "FLANNEL-FWD"
    )
  );
  for (const t of noJump) f.detail += `; ${t.backend} FORWARD has no jump to FLANNEL-FWD`;
  f.persist = [
    ...f.persist ?? [],
    "the daemon keeps FLANNEL-FWD (--iptables-forward-rules, the default), appended: only a rule before " +
    "the one that drops lets the traffic through",
  ];
  return f;
}

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
      const walked = masqWalk(ctx);
      if (walked) return [walked];
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

/**
 * flannel's rules are all there; what the packets meet decides: a pod → remote pod packet must leave with
 * its pod address (a MASQUERADE before flannel's RETURNs hides it: flannel #1337, #1146), a pod → outside
 * packet must be masqueraded. A warning naming the NAT step, or null when both hold or cannot be told.
 */
function masqWalk(ctx: NodeSnapshot): Finding | null {
  const rs = ruleset4(ctx);
  const inner = podForward(ctx, rs)[0];
  const out = podOutside(ctx, rs);
  const problems: string[] = [];
  const fix: string[] = [];
  const n = inner?.verdict.nat;
  if (inner?.verdict.verdict === "pass" && n?.rule) {
    problems.push(`${inner.label} is NATed by ${stepText(n)}`);
    const r = n.rule;
    if (r.backend === "nftables" && r.handle !== null) {
      fix.push(ctx.cmd(sh`nft delete rule ${r.family} ${r.table} ${r.chain} handle ${r.handle}`));
    } else if (r.backend !== "nftables") {
      const tool = r.backend === (ctx.ipt.variant === "legacy" ? "iptables-legacy" : "iptables-nft")
        ? "iptables"
        : r.backend;
      fix.push(ctx.cmd(sh`${tool} -t ${r.table} -D ${r.chain} ${r.position}`));
    }
  }
  if (out?.verdict.verdict === "pass" && !out.verdict.nat) {
    const nat = out.verdict.steps.filter((s) => s.hook === "postrouting" && s.table === "nat").map(placeText);
    problems.push(`${out.label} is not masqueraded (crossed: ${nat.join(", ") || "no nat chain"})`);
    const j = `-m comment --comment "flanneld masq" -j FLANNEL-POSTRTG`;
    fix.push(
      ctx.cmd(`iptables -t nat -D POSTROUTING ${j}`),
      ctx.cmd(`iptables -t nat -I POSTROUTING 1 ${j}`),
    );
  }
  if (!problems.length) return null;
  return {
    id: "masq-rules",
    severity: "warning",
    detail: `FLANNEL-POSTRTG has flannel's rules, but ${problems.join("; ")}`,
    why:
      "a rule before flannel's (another tool's, or a duplicate left by an upgrade) decides the NAT: pods " +
      "reach each other with the node's address (network policies and logs see the node), or reach nothing " +
      "outside (flannel #1337, #1146)",
    fix,
  };
}

function ruleCount(text: string | null): number {
  return (text ?? "").split("\n").filter((l) => l.startsWith("-A ")).length;
}

/** Built-in chains whose policy is not ACCEPT (`FORWARD DROP`): they act like a rule. */
function dropPolicies(text: string | null): string[] {
  return (text ?? "").split("\n").filter((l) => /^:[A-Z]+ DROP /.test(l)).map((l) =>
    l.slice(1).split(" ")[0]
  );
}

/** The back-end iptables names by default (`nf_tables` → `nft`). */
function backendName(variant: string | null): "nft" | "legacy" | null {
  return variant === "legacy" ? "legacy" : variant === "nf_tables" ? "nft" : null;
}

/**
 * iptables-backend: rules (or a DROP policy) in both the legacy and the nf_tables back-end (flannel #1317).
 * Whether that drops flannel's traffic is the path checks' (forward-policy, vxlan-port, udp-port) finding.
 */
export const iptablesMixed: Check = {
  id: "iptables-backend",
  title: "iptables rules in one back-end only",
  run(ctx) {
    const { legacy, nft, variant } = ctx.ipt;
    if (legacy.text === null && nft.text === null) {
      return [unknown("iptables-backend", "neither iptables-legacy-save nor iptables-nft-save is installed")];
    }
    const l = ruleCount(legacy.text), n = ruleCount(nft.text);
    const lp = dropPolicies(legacy.text), np = dropPolicies(nft.text);
    const pol = (p: string[]) =>
      p.length ? ` and DROP polic${p.length === 1 ? "y" : "ies"} on ${p.join(", ")}` : "";
    const detail = `iptables-legacy: ${l} rule(s)${pol(lp)}, iptables-nft: ${n} rule(s)${
      pol(np)
    }; iptables is ${variant ?? "unknown"}`;
    if ((l === 0 && !lp.length) || (n === 0 && !np.length)) return [ok("iptables-backend", detail)];
    const flannelIn = (t: string | null) => /FLANNEL-(POSTRTG|FWD)/.test(t ?? "");
    const where = [flannelIn(legacy.text) ? "legacy" : "", flannelIn(nft.text) ? "nft" : ""].filter(Boolean);
    const used = backendName(variant) ?? "nft";
    const stray = used === "legacy" ? "nft" : "legacy";
    const alt = `/usr/sbin/iptables-${used}`;
    const persist: string[] = [];
    if (hostExists(alt) && hostExists("/usr/bin/update-alternatives")) {
      persist.push(`make every component use one back-end: update-alternatives --set iptables ${alt}`);
    } else persist.push(`make every component (kube-proxy, docker, the CNI plugins) use iptables-${used}`);
    return [{
      id: "iptables-backend",
      severity: "warning",
      detail: `${detail}; flannel chains in: ${where.join(", ") || "none"}`,
      why: "packets traverse both rule sets: a drop in either drops the packet, whatever the other accepts " +
        "(forward-policy, vxlan-port and udp-port walk both); rules written by one tool (kube-proxy, flannel, " +
        "docker) can be shadowed by the other's (flannel #1317, #2145)",
      fix: [
        `inspect both: ${ctx.cmd("iptables-legacy-save")}; ${ctx.cmd("iptables-nft-save")}`,
        `remove the ${stray} rules after checking no component still uses them: ` +
        ctx.cmd(`iptables-${stray}-save`) + " | grep -c -- '-A'",
      ],
      persist,
    }];
  },
};

/** The checks of this family. */
export const IPTABLES_CHECKS: Check[] = [forwardPolicy, masqRules, iptablesMixed];
