/**
 * Probes: what the node's state says, read from one {@link NodeSnapshot} — the node's own subnets and
 * devices, the lease fields, the firewall tables as text, the daemon process. Pure reads over the snapshot
 * (or a process scan), shared by `flanctl doctor` (its checks judge them), `flanctl trace` and `flanctl
 * status`; a finding (ok/warning/critical, why, fix) is the doctor's, not a probe's.
 * @module
 */
import type { IPNet } from "../base/cidr.ts";
import type { LinkInfo } from "../netlink/types.ts";
import { netnsPath } from "../base/netns_id.ts";
import { type DaemonProcess, findDaemonProcess, OWN_NETNS } from "../node/daemon_process.ts";
import { type NodeSnapshot, pickCI } from "./snapshot.ts";

/** The configured UDP port (Backend.Port, default 8285). */
export function udpPort(ctx: NodeSnapshot): number {
  const raw = ctx.store.config?.backend.raw;
  const v = raw ? pickCI(raw, "Port") : undefined;
  return typeof v === "number" && v > 0 ? v : 8285;
}

/** The node's IPv6 network (config, else subnet.env), or null when IPv6 is not configured. */
export function network6(ctx: NodeSnapshot): IPNet | null {
  if (ctx.store.config && !ctx.store.config.enableIPv6) return null;
  return ctx.store.config?.ipv6Network ?? ctx.subnetEnv?.ipv6Network ?? null;
}

/** Our IPv6 subnet: subnet.env, else our lease. */
export function own6(ctx: NodeSnapshot): IPNet | null {
  return ctx.subnetEnv?.ipv6Subnet?.net ?? ctx.ownLease()?.ipv6Subnet ?? null;
}

/** Name of the IPv6 VXLAN device. */
export function dev6Name(ctx: NodeSnapshot): string {
  return `flannel-v6.${ctx.vni}`;
}

/** The IPv6 VXLAN device, or null. */
export function dev6(ctx: NodeSnapshot): LinkInfo | null {
  return ctx.link(dev6Name(ctx));
}

/** Rule lines (`-A CHAIN ...`) of a chain in a table text. */
export function chainRules(table: string, chain: string): string[] {
  return table.split("\n").filter((l) => l.startsWith(`-A ${chain} `));
}

/** Policy of a built-in chain (`:FORWARD DROP [0:0]`), or null when the table is not loaded. */
export function chainPolicy(table: string, chain: string): string | null {
  const m = new RegExp(`^:${chain} (\\S+)`, "m").exec(table);
  return m ? m[1] : null;
}

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

/** The firewall mode the network config says (EnableNFTables), or null without a config. */
export function nftMode(ctx: NodeSnapshot): boolean | null {
  const cfg = ctx.store.config;
  if (cfg) return cfg.enableNFTables;
  return null;
}

/** True in nftables mode: EnableNFTables in the config, else (no config) table ip flannel-ipv4 exists. */
export function nftablesMode(ctx: NodeSnapshot): boolean {
  const mode = nftMode(ctx);
  if (mode !== null) return mode;
  const text = ctx.nftRuleset.text;
  return text !== null && nftTable(text, "ip", "flannel-ipv4") !== null;
}

/** The namespace file of the checked namespace (`--netns NAME`, else this thread's own). */
export function checkedNetns(ctx: NodeSnapshot): string {
  return ctx.opts.netns === null ? OWN_NETNS : netnsPath({ name: ctx.opts.netns });
}

/** A flanneld/flanctl daemon process running in the checked namespace (process scan), or null. */
export function scanForDaemon(ctx: NodeSnapshot): DaemonProcess | null {
  return findDaemonProcess(checkedNetns(ctx));
}
