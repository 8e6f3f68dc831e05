/**
 * nftables mode and hostPort rules: flannel's flannel-ipv4 table (EnableNFTables) with the masquerade rules
 * for our subnet and the forward accepts; flannel rules in both iptables and nftables (a mode switch that
 * did not clean up); hostPort DNAT rules (portmap, either backend) whose pod is gone. Works on the
 * `nft list ruleset` text/JSON and iptables-save text of the checked namespace.
 * @module
 */
import type { Check, Finding } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { DoctorContext } from "../context.ts";
import { chainRules } from "./iptables.ts";
import { IPAddr } from "../../ip/cidr.ts";
import { capList } from "./pods.ts";

/** The lines (trimmed) of `table FAMILY NAME { … }` in `nft list ruleset` text, or null when absent. */
export function nftTable(text: string, family: string, name: string): string[] | null {
  const lines = text.split("\n");
  const start = lines.findIndex((l) => l === `table ${family} ${name} {`);
  if (start < 0) return null;
  const out: string[] = [];
  for (let i = start + 1; i < lines.length && lines[i] !== "}"; i++) {
    if (lines[i].trim()) out.push(lines[i].trim());
  }
  return out;
}

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

/** flanneld's postrtg rules for network/subnet as nft lists them (fully-random or not). */
export function expectedNftMasq(network: string, subnet: string): string[] {
  return [
    "meta mark 0x00004000 return",
    `ip saddr ${subnet} ip daddr ${network} return`,
    `ip saddr ${network} ip daddr ${subnet} return`,
    `ip saddr != ${subnet} ip daddr ${network} return`,
    `ip saddr ${network} ip daddr != 224.0.0.0/4 masquerade`,
    `ip saddr != ${network} ip daddr ${network} masquerade`,
  ];
}

function nftMode(ctx: DoctorContext): boolean | null {
  const cfg = ctx.store.config;
  if (cfg) return cfg.enableNFTables;
  return null;
}

/** nft-rules: in nftables mode, table ip flannel-ipv4 with the masquerade rules and forward accepts. */
export const nftRules: Check = {
  id: "nft-rules",
  title: "flannel's nftables rules (EnableNFTables)",
  run(ctx) {
    const mode = nftMode(ctx);
    const text = ctx.nftRuleset.text;
    const table = text === null ? null : nftTable(text, "ip", "flannel-ipv4");
    if (mode === false || (mode === null && !table)) {
      return [
        ok("nft-rules", "not in nftables mode (EnableNFTables unset): flannel's rules are iptables chains"),
      ];
    }
    if (text === null) {
      return [unknown("nft-rules", `cannot list the nftables ruleset: ${ctx.nftRuleset.error}`)];
    }
    const net = ctx.subnetEnv?.network?.toString() ?? ctx.network?.toString();
    const sub = ctx.subnetEnv?.subnet?.net.toString();
    const problems: string[] = [];
    const fix: string[] = [];
    if (!table) problems.push("table ip flannel-ipv4 does not exist");
    if (table && ctx.subnetEnv?.ipMasq) {
      if (!net || !sub) return [unknown("nft-rules", "subnet.env has no IPv4 network/subnet")];
      const have = nftChain(table, "postrtg");
      if (!have) problems.push("chain postrtg (masquerade) is missing");
      else {
        // "masquerade fully-random" matches "masquerade" (--ip-masq-fully-random-disable or no kernel support).
        const missing = expectedNftMasq(net, sub).filter((w) =>
          !have.some((h) => h === w || h === `${w} fully-random`)
        );
        if (missing.length) problems.push(`postrtg lacks ${missing.length} rule(s): ${missing.join(" | ")}`);
        for (const m of missing) {
          fix.push(ctx.cmd(`nft add rule ip flannel-ipv4 postrtg ${m.replace("0x00004000", "0x4000")}`));
        }
      }
    }
    let fwdNote = "";
    if (table && net) {
      const fwd = nftChain(table, "forward");
      if (!fwd) fwdNote = " (no forward chain: the daemon runs with --iptables-forward-rules=false)";
      else {
        const missing = [`ip saddr ${net} accept`, `ip daddr ${net} accept`].filter((w) => !fwd.includes(w));
        if (missing.length) problems.push(`forward lacks: ${missing.join(" | ")}`);
        for (const m of missing) fix.push(ctx.cmd(`nft add rule ip flannel-ipv4 forward ${m}`));
      }
    }
    if (!problems.length) {
      return [
        ok(
          "nft-rules",
          `table ip flannel-ipv4 has flannel's rules${sub ? ` for ${sub} in ${net}` : ""}${fwdNote}`,
        ),
      ];
    }
    return [{
      id: "nft-rules",
      severity: !table || problems.some((p) => p.includes("postrtg (masquerade)")) ? "critical" : "warning",
      detail: `EnableNFTables: ${problems.join("; ")}`,
      why: "without the postrtg chain pods reach nothing outside the pod network; without the forward " +
        "accepts a FORWARD drop policy (another table's) drops pod traffic between nodes",
      fix: fix.length ? fix : ["restart the daemon: it creates table ip flannel-ipv4 at start"],
      persist: ["flanctl's daemon re-applies the table every --iptables-resync seconds when it differs"],
    }];
  },
};

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
    const iptChains = ["nat FLANNEL-POSTRTG", "filter FLANNEL-FWD"].filter((t) => {
      const [table, chain] = t.split(" ");
      return new RegExp(`^:${chain} `, "m").test(ctx.iptTable(table));
    });
    if (!nftTables.length || !iptChains.length) {
      const where = nftTables.length ? "nftables" : iptChains.length ? "iptables" : "neither mode";
      return [ok("firewall-mode", `flannel's rules are in ${where}`)];
    }
    const mode = nftMode(ctx);
    const stale = mode === true ? "iptables" : mode === false ? "nftables" : null;
    const fix: string[] = [];
    if (stale !== "nftables") {
      fix.push(
        ctx.cmd(`iptables -t nat -D POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG`),
        ctx.cmd("iptables -t nat -F FLANNEL-POSTRTG"),
        ctx.cmd("iptables -t nat -X FLANNEL-POSTRTG"),
        ctx.cmd(`iptables -D FORWARD -m comment --comment "flanneld forward" -j FLANNEL-FWD`),
        ctx.cmd("iptables -F FLANNEL-FWD"),
        ctx.cmd("iptables -X FLANNEL-FWD"),
      );
    }
    if (stale !== "iptables") { for (const t of nftTables) fix.push(ctx.cmd(`nft delete table ${t}`)); }
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

function hostPortRules(ctx: DoctorContext): HostPortRule[] {
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
      if (r.backend === "nftables") fix.push(ctx.cmd(`nft delete rule ${r.where}`));
      else if (!chains.has(r.where)) {
        chains.add(r.where);
        for (
          const j of chainRules(ctx.iptTable("nat"), "CNI-HOSTPORT-DNAT").filter((x) =>
            x.endsWith(` -j ${r.where}`)
          )
        ) {
          fix.push(ctx.cmd(`iptables -t nat ${j.replace(/^-A /, "-D ")}`));
        }
        fix.push(ctx.cmd(`iptables -t nat -F ${r.where}`), ctx.cmd(`iptables -t nat -X ${r.where}`));
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
