/**
 * nftables mode and hostPort rules: flannel's flannel-ipv4 table (EnableNFTables) with the masquerade rules
 * for our subnet and the forward accepts; flannel rules in both iptables and nftables (a mode switch that
 * did not clean up); hostPort DNAT rules (portmap, either backend) whose pod is gone. Works on the
 * `nft list ruleset` text/JSON and iptables-save text of the checked namespace.
 * @module
 */
import type { Check, Finding } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { IPAddr } from "../../base/cidr.ts";
import { capList } from "./pods.ts";
import { chainRules, network6, nftablesMode, nftMode, nftTable, own6 } from "../../observe/probes.ts";
import { sh, words } from "../../base/shell.ts";
import { NFT_CHAINS } from "../../firewall/flannel.ts";

/** The rule lines of `chain NAME { … }` within a table's lines (type/policy/comment lines left out). */
export function nftChain(table: string[], chain: string): string[] | null {
  const start = table.indexOf(`chain ${chain} {`);
  if (start < 0) return null;
  const out: string[] = [];
  for (let i = start + 1; i < table.length && table[i] !== "}"; i++) {
    if (!/^(type |comment ")/.test(table[i])) out.push(table[i]);
  }
  return out;
}

/** flanneld's postrtg rules for network/subnet as nft lists them (fully-random or not); `f` is the family. */
export function expectedNftMasq(network: string, subnet: string, f: "ip" | "ip6" = "ip"): string[] {
  const mcast = f === "ip" ? "224.0.0.0/4" : "ff00::/8";
  return [
    "meta mark 0x00004000 return",
    `${f} saddr ${subnet} ${f} daddr ${network} return`,
    `${f} saddr ${network} ${f} daddr ${subnet} return`,
    `${f} saddr != ${subnet} ${f} daddr ${network} return`,
    `${f} saddr ${network} ${f} daddr != ${mcast} masquerade`,
    `${f} saddr != ${network} ${f} daddr ${network} masquerade`,
  ];
}

/** What one family's flannel table lacks: problems, the nft commands adding it back, a note. */
interface TableCheck {
  problems: string[];
  fix: string[];
  note: string;
  /** The table or its postrtg chain is missing (pods reach nothing outside the pod network). */
  critical: boolean;
}

/**
 * One family's table (`ip flannel-ipv4` or `ip6 flannel-ipv6`): postrtg with the masquerade rules for our
 * subnet (when FLANNEL_IPMASQ=true) and forward with the accepts. Null `sub` with masquerading on: unknown.
 */
function checkNftTable(
  ctx: NodeSnapshot,
  text: string,
  f: "ip" | "ip6",
  net: string,
  sub: string | null,
): TableCheck | string {
  const name = f === "ip" ? "flannel-ipv4" : "flannel-ipv6";
  const table = nftTable(text, f, name);
  const out: TableCheck = { problems: [], fix: [], note: "", critical: false };
  if (!table) {
    out.problems.push(`table ${f} ${name} does not exist`);
    out.critical = true;
    return out;
  }
  if (ctx.subnetEnv?.ipMasq) {
    if (!sub) return `subnet.env has no ${f === "ip" ? "IPv4" : "IPv6"} subnet`;
    const have = nftChain(table, "postrtg");
    if (!have) {
      out.problems.push(`${name} has no chain postrtg (masquerade)`);
      out.critical = true;
    } else {
      // "masquerade fully-random" matches "masquerade" (--ip-masq-fully-random-disable or no kernel support).
      const missing = expectedNftMasq(net, sub, f).filter((w) =>
        !have.some((h) => h === w || h === `${w} fully-random`)
      );
      if (missing.length) {
        out.problems.push(`${name} postrtg lacks ${missing.length} rule(s): ${missing.join(" | ")}`);
      }
      for (const m of missing) {
        out.fix.push(ctx.cmd(`nft add rule ${f} ${name} postrtg ${m.replace("0x00004000", "0x4000")}`));
      }
    }
  }
  const fwd = nftChain(table, "forward");
  if (!fwd) out.note = " (no forward chain: the daemon runs with --iptables-forward-rules=false)";
  else {
    const missing = [`${f} saddr ${net} accept`, `${f} daddr ${net} accept`].filter((w) => !fwd.includes(w));
    if (missing.length) out.problems.push(`${name} forward lacks: ${missing.join(" | ")}`);
    for (const m of missing) out.fix.push(ctx.cmd(`nft add rule ${f} ${name} forward ${m}`));
  }
  return out;
}

/**
 * nft-rules: in nftables mode, table ip flannel-ipv4 (IPv4 enabled) and table ip6 flannel-ipv6 (IPv6
 * enabled) with the masquerade rules for our subnet and the forward accepts.
 */
export const nftRules: Check = {
  id: "nft-rules",
  title: "flannel's nftables rules (EnableNFTables)",
  run(ctx) {
    const text = ctx.nftRuleset.text;
    if (!nftablesMode(ctx)) {
      return [
        ok("nft-rules", "not in nftables mode (EnableNFTables unset): flannel's rules are iptables chains"),
      ];
    }
    if (text === null) {
      return [unknown("nft-rules", `cannot list the nftables ruleset: ${ctx.nftRuleset.error}`)];
    }
    const families: { f: "ip" | "ip6"; net: string; sub: string | null }[] = [];
    if (!ctx.ipv4Disabled) {
      const net = ctx.subnetEnv?.network?.toString() ?? ctx.network?.toString();
      if (!net) return [unknown("nft-rules", "subnet.env has no IPv4 network/subnet")];
      families.push({ f: "ip", net, sub: ctx.subnetEnv?.subnet?.net.toString() ?? null });
    }
    const net6 = network6(ctx);
    if (net6) families.push({ f: "ip6", net: net6.toString(), sub: own6(ctx)?.toString() ?? null });
    const problems: string[] = [];
    const fix: string[] = [];
    const good: string[] = [];
    let critical = false;
    for (const { f, net, sub } of families) {
      const r = checkNftTable(ctx, text, f, net, sub);
      if (typeof r === "string") return [unknown("nft-rules", r)];
      problems.push(...r.problems);
      fix.push(...r.fix);
      critical ||= r.critical;
      const name = f === "ip" ? "flannel-ipv4" : "flannel-ipv6";
      good.push(`table ${f} ${name} has flannel's rules${sub ? ` for ${sub} in ${net}` : ""}${r.note}`);
    }
    if (!problems.length) return [ok("nft-rules", good.join("; "))];
    return [{
      id: "nft-rules",
      severity: critical ? "critical" : "warning",
      detail: `EnableNFTables: ${problems.join("; ")}`,
      why: "without the postrtg chain pods reach nothing outside the pod network; without the forward " +
        "accepts a FORWARD drop policy (another table's) drops pod traffic between nodes",
      fix: fix.length ? fix : ["restart the daemon: it creates flannel's nft tables at start"],
      persist: ["flanctl's daemon re-applies the table every --iptables-resync seconds when it differs"],
    }];
  },
};

/**
 * One family's table as a finding (`nft-rules`), for trace's walk: ok, or critical when the table or its
 * postrtg chain is missing, warning for missing rules; unknown when the ruleset or subnet is unreadable.
 */
export function nftFamilyFinding(ctx: NodeSnapshot, f: "ip" | "ip6"): Finding {
  const text = ctx.nftRuleset.text;
  if (text === null) return unknown("nft-rules", `cannot list the nftables ruleset: ${ctx.nftRuleset.error}`);
  const net = f === "ip6" ? network6(ctx)?.toString() : (ctx.subnetEnv?.network ?? ctx.network)?.toString();
  if (!net) return unknown("nft-rules", `no ${f === "ip" ? "IPv4" : "IPv6"} network configured`);
  const sub = f === "ip6" ? own6(ctx)?.toString() ?? null : ctx.subnetEnv?.subnet?.net.toString() ?? null;
  const r = checkNftTable(ctx, text, f, net, sub);
  if (typeof r === "string") return unknown("nft-rules", r);
  const name = f === "ip" ? "flannel-ipv4" : "flannel-ipv6";
  if (!r.problems.length) {
    return ok(
      "nft-rules",
      `table ${f} ${name} has flannel's rules${sub ? ` for ${sub} in ${net}` : ""}${r.note}`,
    );
  }
  return {
    id: "nft-rules",
    severity: r.critical ? "critical" : "warning",
    detail: `EnableNFTables: ${r.problems.join("; ")}`,
    why: "without the postrtg chain pods reach nothing outside the pod network; without the forward " +
      "accepts a FORWARD drop policy (another table's) drops pod traffic between nodes",
    fix: r.fix.length ? r.fix : ["restart the daemon: it creates flannel's nft tables at start"],
  };
}

/** firewall-mode: flannel's rules in both iptables and nftables form (flannel #2145). */
export const firewallMixed: Check = {
  id: "firewall-mode",
  title: "flannel's rules in one mode only (iptables or nftables)",
  run(ctx) {
    const text = ctx.nftRuleset.text;
    const ipt = ctx.ipt.main.text;
    if (text === null && ipt === null) {
      return [unknown("firewall-mode", "neither nft nor iptables-save could be read")];
    }
    const nftTables = ["ip flannel-ipv4", "ip6 flannel-ipv6"].filter((t) => {
      const [f, n] = t.split(" ");
      const tbl = text === null ? null : nftTable(text, f, n);
      return tbl !== null && tbl.some((l) => l.startsWith("chain "));
    });
    const has = (dump: string, chain: string) => new RegExp(`^:${chain} `, "m").test(dump);
    const v4 = ["nat FLANNEL-POSTRTG", "filter FLANNEL-FWD"].filter((t) => {
      const [table, chain] = t.split(" ");
      return has(ctx.iptTable(table), chain);
    });
    // ip6tables leftovers too (dual stack / IPv6-only in iptables mode).
    const v6 = ["nat FLANNEL-POSTRTG", "filter FLANNEL-FWD"].filter((t) => {
      const [table, chain] = t.split(" ");
      return has(ctx.ip6tTable(table), chain);
    });
    const iptChains = [...v4, ...v6.map((t) => `ip6 ${t}`)];
    if (!nftTables.length || !iptChains.length) {
      const where = nftTables.length ? "nftables" : iptChains.length ? "iptables" : "neither mode";
      return [ok("firewall-mode", `flannel's rules are in ${where}`)];
    }
    const mode = nftMode(ctx);
    const stale = mode === true ? "iptables" : mode === false ? "nftables" : null;
    const fix: string[] = [];
    if (stale !== "nftables") {
      for (const [tool, chains] of [["iptables", v4], ["ip6tables", v6]] as const) {
        if (!chains.length) continue;
        fix.push(
          ctx.cmd(`${tool} -t nat -D POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG`),
          ctx.cmd(`${tool} -t nat -F FLANNEL-POSTRTG`),
          ctx.cmd(`${tool} -t nat -X FLANNEL-POSTRTG`),
          ctx.cmd(`${tool} -D FORWARD -m comment --comment "flanneld forward" -j FLANNEL-FWD`),
          ctx.cmd(`${tool} -F FLANNEL-FWD`),
          ctx.cmd(`${tool} -X FLANNEL-FWD`),
        );
      }
    }
    if (stale !== "iptables") {
      // flanneld's chains only: a table that also holds another program's chains, sets or maps stays.
      for (const t of nftTables) {
        const [f, n] = t.split(" ");
        const lines = nftTable(text ?? "", f, n) ?? [];
        const objects = lines.filter((l) =>
          /^(chain|set|map|flowtable|counter|quota|ct|limit|secmark|synproxy) /.test(l)
        );
        const ours = objects.filter((l) => NFT_CHAINS.some((c) => l === `chain ${c} {`));
        if (ours.length === objects.length) fix.push(ctx.cmd(`nft delete table ${words(t)}`));
        else for (const l of ours) fix.push(ctx.cmd(`nft delete chain ${words(t)} ${l.split(" ")[1]}`));
      }
    }
    return [{
      id: "firewall-mode",
      severity: "warning",
      detail:
        `flannel's rules in both modes: nftables ${nftTables.join(", ")}; iptables ${iptChains.join(", ")}` +
        (stale ? `; the network config says ${stale === "iptables" ? "nftables" : "iptables"} mode` : ""),
      why: "both rule sets masquerade and accept pod traffic: stale ones (an old subnet after a lease " +
        "change) masquerade traffic that must not be, and the two modes' order is not defined (flannel #2145)",
      fix: stale ? fix : ["remove the rules of the mode the daemon does not run in:", ...fix],
      persist: ["a flanctl (or flanneld ≥ 0.26) daemon removes the other mode's rules at start"],
    }];
  },
};

/** A hostPort DNAT rule and where it points. */
interface HostPortRule {
  backend: "iptables" | "nftables";
  target: string;
  /** Where it lives: the CNI-DN chain, or the nft rule handle. */
  where: string;
  containerId: string | null;
}

function hostPortRules(ctx: NodeSnapshot): HostPortRule[] {
  const out: HostPortRule[] = [];
  const nat = ctx.iptTable("nat");
  const ids = new Map<string, string>();
  for (const r of chainRules(nat, "CNI-HOSTPORT-DNAT")) {
    const m = /id: \\"([^"\\]*)\\"" .*-j (CNI-DN-[0-9a-f]+)$/.exec(r);
    if (m) ids.set(m[2], m[1]);
  }
  for (const l of nat.split("\n")) {
    const m = /^-A (CNI-DN-[0-9a-f]+) .*-j DNAT --to-destination \[?([0-9a-f.:]+?)\]?:\d+$/.exec(l);
    if (m) out.push({ backend: "iptables", target: m[2], where: m[1], containerId: ids.get(m[1]) ?? null });
  }
  const json = ctx.nftRuleset.json as { nftables?: Record<string, unknown>[] } | null;
  for (const o of json?.nftables ?? []) {
    const r = o.rule as
      | { family: string; table: string; chain: string; handle: number; comment?: string; expr?: unknown[] }
      | undefined;
    if (!r || r.table !== "cni_hostport" || r.chain !== "hostports") continue;
    const dnat = (r.expr ?? []).map((e) => (e as { dnat?: { addr?: string } }).dnat).find((d) => d?.addr);
    if (dnat?.addr) {
      out.push({
        backend: "nftables",
        target: dnat.addr,
        where: `${r.family} cni_hostport hostports handle ${r.handle}`,
        containerId: r.comment ?? null,
      });
    }
  }
  return out;
}

/** hostports: hostPort DNAT rules to an address of our pod subnet that no running pod has. */
export const hostportStale: Check = {
  id: "hostports",
  title: "hostPort rules point at running pods",
  run(ctx) {
    const rules = hostPortRules(ctx);
    if (!rules.length) return [ok("hostports", "no hostPort (portmap) rules")];
    const sub = ctx.subnetEnv?.subnet?.net;
    if (!sub) return [unknown("hostports", `${rules.length} hostPort rule(s); subnet.env unavailable`)];
    const live = new Set([...ctx.pods.values()].flatMap((p) => p.ips));
    const stale = rules.filter((r) => {
      const ip = IPAddr.tryParse(r.target);
      return ip !== null && sub.contains(ip) && !live.has(r.target);
    });
    if (!stale.length) {
      return [
        ok("hostports", `${rules.length} hostPort rule(s), all to running pods or outside ${sub}`),
      ];
    }
    const fix: string[] = [];
    const chains = new Set<string>();
    for (const r of stale) {
      if (r.backend === "nftables") fix.push(ctx.cmd(`nft delete rule ${words(r.where)}`));
      else if (!chains.has(r.where)) {
        chains.add(r.where);
        for (
          const j of chainRules(ctx.iptTable("nat"), "CNI-HOSTPORT-DNAT").filter((x) =>
            x.endsWith(` -j ${r.where}`)
          )
        ) {
          fix.push(ctx.cmd(`iptables -t nat ${j.replace(/^-A /, "-D ")}`));
        }
        fix.push(ctx.cmd(sh`iptables -t nat -F ${r.where}`), ctx.cmd(sh`iptables -t nat -X ${r.where}`));
      }
    }
    const what = stale.map((r) =>
      `${r.target} (${r.backend} ${r.where}${r.containerId ? `, container ${r.containerId}` : ""})`
    );
    const f: Finding = {
      id: "hostports",
      severity: "warning",
      detail: `${stale.length} hostPort rule(s) to addresses no running pod has: ${capList(what)}`,
      why:
        "the pod is gone but its DEL did not reach portmap: the host port still forwards to the address, " +
        "which the next pod given that IP receives (plugins #810)",
      fix,
      persist: ["`portmap` GC (CNI 1.1 runtimes) or a DEL for the container removes them"],
    };
    return [f];
  },
};

/** The checks of this family. */
export const NFTABLES_CHECKS: Check[] = [nftRules, firewallMixed, hostportStale];
