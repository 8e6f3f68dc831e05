/**
 * hostPort mappings as firewall data, for the portmap CNI plugin. Two renderings, each the reference
 * portmap's (containernetworking/plugins plugins/meta/portmap):
 *
 * iptables (nat table): PREROUTING and OUTPUT `-m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT`;
 * CNI-HOSTPORT-DNAT jumps per protocol (multiport, 15 ports a rule, commented `dnat name: "<net>" id:
 * "<cid>"`) to the container's chain `CNI-DN-<sha512(net+cid)>` (28 chars), which holds per mapping the
 * hairpin and localhost mark rules (→ CNI-HOSTPORT-SETMARK, `MARK --set-xmark <bit>`) and the DNAT;
 * CNI-HOSTPORT-MASQ (jumped to first in POSTROUTING) masquerades marked packets. Rules are written in
 * iptables-save's canonical form, so what we apply is what `iptables-save` prints back, and ADD/CHECK/DEL
 * compare text. Shared chains are only added to, never flushed; the container's chain is flushed and
 * refilled. One `iptables-restore --noflush` transaction per change and family.
 *
 * nftables: table `ip|ip6 cni_hostport` with chains hostports, hostip_hostports, hostports_all,
 * prerouting/output (nat, dstnat, `fib daddr type local jump hostports_all`) and masquerading (nat,
 * srcnat); each container's rules carry its container ID as comment, and DEL deletes exactly those (by
 * handle), as the reference's nftables backend (≥ 1.5) does. One nft buffer per change.
 *
 * nftables GC: the reference has none (its main.go: "FIXME GC"), and its rules name no network, so the
 * container IDs of one network's rules cannot be told from another's. ADD therefore also records the
 * container in a chain of the table named after the network, `network_<name>` (never hooked, never jumped
 * to: one `return` rule per container, commented with its ID, in the same transaction as the rules). GC of
 * network N deletes the rules of the containers recorded in N's chain that are not in the valid list,
 * unless another network's chain records the same ID too; rules nobody recorded (the reference plugin's,
 * or flanctl's before this) are left alone. The chains the reference reads are unchanged, so its DEL and
 * CHECK work on our rules and ours on its rules; its DEL leaves our record, which GC then removes.
 * @module
 */
import { IPAddr, IPNet } from "../base/cidr.ts";
import type { Iptables } from "./iptables.ts";
import { restoreText, splitSave } from "./iptables.ts";
import { isNotFound, type NftDriver, nftQuote } from "./nft.ts";
import type { Family } from "./types.ts";

/** The shared chains (never renamed: upgrades depend on them). */
export const TOP_DNAT = "CNI-HOSTPORT-DNAT";
export const SETMARK = "CNI-HOSTPORT-SETMARK";
export const MARK_MASQ = "CNI-HOSTPORT-MASQ";
/** The nft table. */
export const NFT_TABLE = "cni_hostport";

/** One validated mapping. */
export interface PortMapping {
  hostPort: number;
  containerPort: number;
  protocol: "tcp" | "udp" | "sctp";
  /** Host address to match (absent, or unspecified = every local address). */
  hostIP?: string;
}

/** Everything the rules of one container and family are built from. */
export interface PortMapSpec {
  /** The network name (config `name`). */
  network: string;
  containerId: string;
  family: Family;
  /** The container's address with prefix, e.g. "10.244.1.5/24". */
  containerAddr: string;
  /** The mappings for this family (hostIP of the other family already left out). */
  mappings: PortMapping[];
  /** Every mapping: the reference's multiport entry rules list all host ports, whatever the hostIP. */
  allMappings?: PortMapping[];
  snat: boolean;
  masqAll: boolean;
  markMasqBit: number;
  externalSetMarkChain?: string;
  /** Extra match tokens for the entry rules (conditionsV4/V6, in the backend's syntax). */
  conditions: string[];
}

/** "CNI-" + prefix + sha512(name+id) in hex, cut to 28 characters (the reference's chain names). */
export async function hashChain(prefix: string, network: string, containerId: string): Promise<string> {
  const h = new Uint8Array(
    await crypto.subtle.digest("SHA-512", new TextEncoder().encode(network + containerId)),
  );
  return ("CNI-" + prefix + Array.from(h, (b) => b.toString(16).padStart(2, "0")).join("")).slice(0, 28);
}

/** The container's DNAT chain name. */
export function dnatChain(network: string, containerId: string): Promise<string> {
  return hashChain("DN-", network, containerId);
}

function quote(s: string): string {
  return `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

/** A token for an iptables-restore line (quoted when it has blanks or quotes). */
function token(s: string): string {
  return /^[^\s"'\\]+$/.test(s) ? s : quote(s);
}

function markHex(bit: number): string {
  const v = 2 ** bit;
  return `0x${v.toString(16)}/0x${v.toString(16)}`;
}

function hostIPOf(m: PortMapping): string | null {
  if (!m.hostIP) return null;
  const ip = IPAddr.parse(m.hostIP, "hostIP");
  return ip.value === 0n ? null : ip.toString();
}

function hostCidr(ip: string): string {
  return `${ip}/${ip.includes(":") ? 128 : 32}`;
}

function ipPort(ip: string, port: number): string {
  return ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** The multiport port lists per protocol (sorted protocols, mapping order, 15 ports a list). */
export function portLists(mappings: PortMapping[]): [string, string][] {
  const by = new Map<string, number[]>();
  for (const m of mappings) by.set(m.protocol, [...(by.get(m.protocol) ?? []), m.hostPort]);
  const out: [string, string][] = [];
  for (const proto of [...by.keys()].sort()) {
    const ports = by.get(proto)!;
    for (let i = 0; i < ports.length; i += 15) out.push([proto, ports.slice(i, i + 15).join(",")]);
  }
  return out;
}

/** One chain of the iptables rendering: rules in iptables-save form (without `-A CHAIN`). */
export interface IptChain {
  name: string;
  rules: string[];
  /** Entry rules (without `-j NAME`) in each of `entryChains`. */
  entryChains: string[];
  entryRules: string[];
  /** Insert the entry rules at the top of the entry chains. */
  prepend?: boolean;
}

/** The shared chains ADD needs (SETMARK and MASQ only with snat and no externalSetMarkChain). */
export function sharedChains(spec: PortMapSpec): IptChain[] {
  const out: IptChain[] = [];
  if (spec.snat && !spec.externalSetMarkChain) {
    const mark = markHex(spec.markMasqBit);
    out.push({
      name: SETMARK,
      rules: [`-m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark ${mark}`],
      entryChains: [],
      entryRules: [],
    });
    out.push({
      name: MARK_MASQ,
      rules: [`-m mark --mark ${mark} -j MASQUERADE`],
      entryChains: ["POSTROUTING"],
      entryRules: [`-m comment --comment "CNI portfwd requiring masquerade"`],
      prepend: true,
    });
  }
  out.push({
    name: TOP_DNAT,
    rules: [],
    entryChains: ["PREROUTING", "OUTPUT"],
    entryRules: ["-m addrtype --dst-type LOCAL"],
  });
  return out;
}

/** The container's chain: per mapping hairpin mark, localhost mark (IPv4), DNAT. */
export function containerChain(spec: PortMapSpec, name: string): IptChain {
  const { ip, net } = IPNet.parseWithHost(spec.containerAddr, "prevResult.ips");
  const setMark = spec.externalSetMarkChain ?? SETMARK;
  const cmt = `dnat name: ${JSON.stringify(spec.network)} id: ${JSON.stringify(spec.containerId)}`;
  const comment = cmt.length <= 255 ? cmt : cmt.slice(0, 253) + "...";
  const cond = spec.conditions.map(token).join(" ");
  const entryRules = portLists(spec.allMappings ?? spec.mappings).map(([proto, ports]) =>
    `-p ${proto} -m comment --comment ${quote(comment)} -m multiport --dports ${ports}${
      cond ? " " + cond : ""
    }`
  );
  const rules: string[] = [];
  for (const m of spec.mappings) {
    const hip = hostIPOf(m);
    const d = hip ? `-d ${hostCidr(hip)} ` : "";
    const match = `-p ${m.protocol} -m ${m.protocol} --dport ${m.hostPort}`;
    if (spec.snat) {
      // iptables-save prints no `-s` for 0.0.0.0/0 (masqAll).
      const src = spec.masqAll ? "" : `-s ${net} `;
      rules.push(`${src}${d}${match} -j ${setMark}`);
      if (spec.family === 4 && !spec.masqAll) rules.push(`-s 127.0.0.1/32 ${d}${match} -j ${setMark}`);
    }
    rules.push(`${d}${match} -j DNAT --to-destination ${ipPort(ip.toString(), m.containerPort)}`);
  }
  return { name, rules, entryChains: [TOP_DNAT], entryRules };
}

/** A chain's state in one table's iptables-save lines. */
function chainLines(lines: string[], chain: string): { exists: boolean; rules: string[] } {
  const rules: string[] = [];
  let exists = false;
  for (const l of lines) {
    if (l.startsWith(`:${chain} `)) exists = true;
    else if (l.startsWith(`-A ${chain} `)) rules.push(l.slice(`-A ${chain} `.length));
  }
  return { exists, rules };
}

/**
 * The restore text that adds `spec`'s rules to a nat table whose iptables-save lines are `lines`: shared
 * chains created when missing and their rules appended when missing; the container's chain declared
 * (created, or flushed) and filled, its old entry rules deleted and the new ones appended.
 */
export function iptablesAddText(lines: string[], spec: PortMapSpec, chainName: string): string {
  const decl: string[] = [];
  const body: string[] = [];
  const own = containerChain(spec, chainName);
  for (const c of sharedChains(spec)) {
    const st = chainLines(lines, c.name);
    if (!st.exists) decl.push(`:${c.name} - [0:0]`);
    for (const r of c.rules) if (!st.rules.includes(r)) body.push(`-A ${c.name} ${r}`);
    for (const parent of c.entryChains) {
      const have = chainLines(lines, parent).rules;
      for (const e of c.entryRules) {
        const rule = `${e} -j ${c.name}`;
        if (!have.includes(rule)) body.push(c.prepend ? `-I ${parent} 1 ${rule}` : `-A ${parent} ${rule}`);
      }
    }
  }
  decl.push(`:${own.name} - [0:0]`);
  for (const r of chainLines(lines, TOP_DNAT).rules) {
    if (r.endsWith(` -j ${own.name}`)) body.push(`-D ${TOP_DNAT} ${r}`);
  }
  body.push(...own.rules.map((r) => `-A ${own.name} ${r}`));
  body.push(...own.entryRules.map((e) => `-A ${TOP_DNAT} ${e} -j ${own.name}`));
  return restoreText(new Map([["nat", [...decl, ...body]]]));
}

/** What CHECK finds missing in `lines` (empty: all there). Entry rules with conditions are counted. */
export function iptablesMissing(lines: string[], spec: PortMapSpec, chainName: string): string[] {
  const own = containerChain(spec, chainName);
  const st = chainLines(lines, own.name);
  if (!st.exists) return [`chain ${own.name} not found in table nat`];
  const missing = own.rules.filter((r) => !st.rules.includes(r)).map((r) => `-A ${own.name} ${r}`);
  const entries = chainLines(lines, TOP_DNAT).rules.filter((r) => r.endsWith(` -j ${own.name}`));
  if (spec.conditions.length) {
    if (entries.length < own.entryRules.length) missing.push(`entry rules for ${own.name} in ${TOP_DNAT}`);
  } else {
    for (const e of own.entryRules) {
      if (!entries.includes(`${e} -j ${own.name}`)) missing.push(`-A ${TOP_DNAT} ${e} -j ${own.name}`);
    }
  }
  return missing;
}

/** Adds the mappings (iptables backend), one transaction. */
export async function iptablesAdd(ipt: Iptables, spec: PortMapSpec): Promise<void> {
  const chain = await dnatChain(spec.network, spec.containerId);
  const lines = splitSave(await ipt.save("nat")).get("nat") ?? [];
  await ipt.restore(iptablesAddText(lines, spec, chain));
}

/** Removes the container's chains (DNAT, and the old SNAT chain of older plugins) and every jump to them. */
export async function iptablesDel(ipt: Iptables, network: string, containerId: string): Promise<string[]> {
  const chains = [await dnatChain(network, containerId), await hashChain("SN-", network, containerId)];
  return await ipt.removeChains("nat", chains);
}

/** Container IDs of `network` that have a DNAT chain (from the entry rules' comments). */
export function iptablesContainers(lines: string[], network: string): Map<string, string> {
  const out = new Map<string, string>();
  const re =
    /--comment "dnat name: \\"((?:[^"\\]|\\\\.)*)\\" id: \\"((?:[^"\\]|\\\\.)*)\\"" .* -j (CNI-DN-[0-9a-f]+)$/;
  for (const r of chainLines(lines, TOP_DNAT).rules) {
    const m = re.exec(r);
    if (m && m[1] === network) out.set(m[2], m[3]);
  }
  return out;
}

// ---- nftables --------------------------------------------------------------------------------------

function nftFamily(f: Family): "ip" | "ip6" {
  return f === 4 ? "ip" : "ip6";
}

/** The nft buffer that adds `spec`'s rules (the base structure is (re)declared every time). */
export function nftAddScript(spec: PortMapSpec): string {
  const f = nftFamily(spec.family);
  const t = `${f} ${NFT_TABLE}`;
  const { ip } = IPNet.parseWithHost(spec.containerAddr, "prevResult.ips");
  const cip = ip.toString();
  const cond = spec.conditions.length ? spec.conditions.join(" ") + " " : "";
  const cmt = `comment ${nftQuote(spec.containerId)}`;
  const out = [
    `add table ${t} { comment "CNI portmap plugin" ; }`,
    `add chain ${t} hostports`,
    `add chain ${t} hostip_hostports`,
    `add chain ${t} hostports_all`,
    `flush chain ${t} hostports_all`,
    `add rule ${t} hostports_all jump hostip_hostports`,
    `add rule ${t} hostports_all jump hostports`,
    `add chain ${t} prerouting { type nat hook prerouting priority dstnat ; }`,
    `flush chain ${t} prerouting`,
    `add rule ${t} prerouting ${cond}fib daddr type local jump hostports_all`,
    // -100 is dstnat; nft before 1.0.7 accepts the name only on the prerouting hook.
    `add chain ${t} output { type nat hook output priority -100 ; }`,
    `flush chain ${t} output`,
    `add rule ${t} output ${cond}fib daddr type local jump hostports_all`,
  ];
  if (spec.snat) out.push(`add chain ${t} masquerading { type nat hook postrouting priority srcnat ; }`);
  for (const m of spec.mappings) {
    const hip = hostIPOf(m);
    const d = hip ? `${f} daddr ${hip} ` : "";
    out.push(
      `add rule ${t} hostports ${d}${m.protocol} dport ${m.hostPort} dnat to ${
        ipPort(cip, m.containerPort)
      } ${cmt}`,
    );
  }
  if (spec.snat) {
    const src = spec.masqAll ? (spec.family === 4 ? "0.0.0.0/0" : "::/0") : cip;
    out.push(`add rule ${t} masquerading ${f} saddr ${src} ${f} daddr ${cip} masquerade ${cmt}`);
    if (spec.family === 4 && !spec.masqAll) {
      out.push(`add rule ${t} masquerading ${f} saddr 127.0.0.1 ${f} daddr ${cip} masquerade ${cmt}`);
    }
  }
  const oc = ownerChain(spec.network);
  if (oc) {
    out.push(
      `add chain ${t} ${oc} { comment ${
        nftQuote(`containers of CNI network ${spec.network} (portmap GC)`)
      } ; }`,
      `add rule ${t} ${oc} return ${cmt}`,
    );
  }
  return out.join("\n") + "\n";
}

/** Network names that can be part of an nft chain name (the CNI spec's name rule; bounded length). */
const CHAIN_SAFE = /^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$/;

/** The chain recording `network`'s containers (null: a name nft cannot carry, then no GC for it). */
export function ownerChain(network: string): string | null {
  return CHAIN_SAFE.test(network) ? `network_${network}` : null;
}

interface NftRule {
  family: string;
  table: string;
  chain: string;
  handle: number;
  comment?: string;
}

/** Our table's rules (JSON listing with handles), or [] when the table is not there. */
export async function nftRules(nft: NftDriver, family: Family): Promise<NftRule[]> {
  return (await nftListing(nft, family)).rules;
}

/** Our table's rules and chain names, or none when the table is not there. */
async function nftListing(nft: NftDriver, family: Family): Promise<{ rules: NftRule[]; chains: string[] }> {
  let out: string;
  try {
    out = await nft.run(`list table ${nftFamily(family)} ${NFT_TABLE}\n`, { json: true, handles: true });
  } catch (e) {
    if (isNotFound(e)) return { rules: [], chains: [] };
    throw e;
  }
  const items = (JSON.parse(out) as { nftables?: Record<string, unknown>[] }).nftables ?? [];
  return {
    rules: items.filter((o) => o.rule).map((o) => o.rule as NftRule),
    chains: items.filter((o) => o.chain).map((o) => String((o.chain as { name?: unknown }).name)),
  };
}

/**
 * Deletes `network`'s record chain when no container is recorded in it any more, so the table holds only
 * the reference's chains once the network's last container is gone. Best effort: a concurrent ADD that
 * records a container first makes the delete fail (the chain is busy), which is right.
 */
async function dropEmptyOwnerChain(nft: NftDriver, family: Family, oc: string): Promise<void> {
  const { rules, chains } = await nftListing(nft, family);
  if (!chains.includes(oc) || rules.some((r) => r.chain === oc)) return;
  await deleteChainIfEmpty(nft, family, oc);
}

async function deleteChainIfEmpty(nft: NftDriver, family: Family, oc: string): Promise<void> {
  try {
    await nft.run(`delete chain ${nftFamily(family)} ${NFT_TABLE} ${oc}\n`);
  } catch { /* busy again, or already gone */ }
}

const DEL_CHAINS = new Set(["hostports", "hostip_hostports", "masquerading"]);

/**
 * The nft buffer deleting the rules commented `containerId` (null: none) in the reference's chains and in
 * `alsoChains` (the network's record chain).
 */
export function nftDelScript(
  rules: NftRule[],
  family: Family,
  containerId: string,
  alsoChains: string[] = [],
): string | null {
  const mine = rules.filter((r) =>
    (DEL_CHAINS.has(r.chain) || alsoChains.includes(r.chain)) && r.comment === containerId
  );
  if (!mine.length) return null;
  return mine.map((r) => `delete rule ${nftFamily(family)} ${NFT_TABLE} ${r.chain} handle ${r.handle}`)
    .join("\n") + "\n";
}

/** Adds the mappings (nftables backend), one buffer. */
export async function nftAdd(nft: NftDriver, spec: PortMapSpec): Promise<void> {
  await nft.run(nftAddScript(spec));
}

/**
 * Deletes the container's rules in both families, and its record in `network`'s chain. Returns how many
 * rules were deleted.
 */
export async function nftDel(nft: NftDriver, containerId: string, network = ""): Promise<number> {
  let n = 0;
  const oc = ownerChain(network);
  for (const f of [4, 6] as const) {
    const { rules, chains } = await nftListing(nft, f);
    const script = nftDelScript(rules, f, containerId, oc ? [oc] : []);
    if (script) {
      await nft.run(script);
      n += script.split("\n").filter(Boolean).length;
    }
    // The network's last container gone: its record chain goes too (the reference's table has none).
    if (oc && chains.includes(oc) && !rules.some((r) => r.chain === oc && r.comment !== containerId)) {
      await deleteChainIfEmpty(nft, f, oc);
    }
  }
  return n;
}

/** What CHECK finds missing (nftables): fewer rules commented with the container ID than expected. */
export async function nftMissing(nft: NftDriver, spec: PortMapSpec): Promise<string[]> {
  const rules = (await nftRules(nft, spec.family)).filter((r) => r.comment === spec.containerId);
  const missing: string[] = [];
  const hp = rules.filter((r) => r.chain === "hostports").length;
  if (hp < spec.mappings.length) missing.push(`missing hostport rules in "hostports" chain`);
  const masq = spec.snat ? (spec.family === 4 && !spec.masqAll ? 2 : 1) : 0;
  if (rules.filter((r) => r.chain === "masquerading").length < masq) {
    missing.push(`missing hostport rules in "masquerading" chain`);
  }
  return missing;
}

/** What one family's GC decided: the containers whose rules were deleted, and those left to another network. */
export interface NftGcPlan {
  /** The buffer to run (null: nothing to delete). */
  script: string | null;
  /** Stale containers whose rules (and record) are deleted. */
  removed: string[];
  /** Stale here but recorded by another network too: only this network's record is deleted. */
  shared: string[];
}

/** The GC buffer for `network` in one family (see the module doc): pure, from the table's rules. */
export function nftGcPlan(rules: NftRule[], family: Family, network: string, keep: Set<string>): NftGcPlan {
  const oc = ownerChain(network);
  if (!oc) return { script: null, removed: [], shared: [] };
  const stale = new Set<string>();
  const elsewhere = new Set<string>();
  for (const r of rules) {
    if (!r.comment || !r.chain.startsWith("network_")) continue;
    if (r.chain === oc) {
      if (!keep.has(r.comment)) stale.add(r.comment);
    } else elsewhere.add(r.comment);
  }
  const removed = [...stale].filter((id) => !elsewhere.has(id));
  const shared = [...stale].filter((id) => elsewhere.has(id));
  const gone = new Set(removed);
  const lines: string[] = [];
  const t = `${nftFamily(family)} ${NFT_TABLE}`;
  for (const r of rules) {
    if (!r.comment || !stale.has(r.comment)) continue;
    if (r.chain === oc || (DEL_CHAINS.has(r.chain) && gone.has(r.comment))) {
      lines.push(`delete rule ${t} ${r.chain} handle ${r.handle}`);
    }
  }
  return { script: lines.length ? lines.join("\n") + "\n" : null, removed, shared };
}

/**
 * GC (nftables): deletes the rules of `network`'s recorded containers that are not in `keep`, one buffer
 * per family. Returns the container IDs whose rules were deleted.
 */
export async function nftGc(nft: NftDriver, network: string, keep: Set<string>): Promise<NftGcPlan[]> {
  const out: NftGcPlan[] = [];
  for (const f of [4, 6] as const) {
    const plan = nftGcPlan(await nftRules(nft, f), f, network, keep);
    if (plan.script) await nft.run(plan.script);
    const oc = ownerChain(network);
    if (plan.script && oc) await dropEmptyOwnerChain(nft, f, oc);
    out.push(plan);
  }
  return out;
}
