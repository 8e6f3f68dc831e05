/**
 * The bridge plugin's per-container masquerade chain, as the reference makes it: nat chain
 * `CNI-<sha512(network+containerID) hex>` (28 chars) with `-d <subnet> ACCEPT` and `! -d <multicast>
 * MASQUERADE`, jumped to from POSTROUTING `-s <ip>`, each rule commented `name: "<net>" id: "<cid>"`.
 * Changes go through the firewall layer's iptables driver: one `iptables-restore --noflush -w` (atomic,
 * one process, waits for the xtables lock); teardown finds the POSTROUTING jumps by chain name in `iptables-save`, so it needs neither the
 * netns nor the IPs (the reference leaks these rules when DEL comes without a netns, plugins #810).
 * @module
 */
import { IPNet } from "../base/cidr.ts";
import { Iptables, removeChainLines, restoreText, splitSave } from "../firewall/iptables.ts";
import { FirewallError } from "../firewall/types.ts";
import { CniError, ErrCode } from "./spec.ts";

/** The reference's chain name for (network, container): "CNI-" + sha512 hex, cut to 28 characters. */
export async function chainName(network: string, containerId: string): Promise<string> {
  const h = new Uint8Array(
    await crypto.subtle.digest("SHA-512", new TextEncoder().encode(network + containerId)),
  );
  return ("CNI-" + Array.from(h, (b) => b.toString(16).padStart(2, "0")).join("")).slice(0, 28);
}

/** The reference's rule comment. */
export function comment(network: string, containerId: string): string {
  return `name: ${JSON.stringify(network)} id: ${JSON.stringify(containerId)}`;
}

function quote(s: string): string {
  return `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

const IPT = { 4: new Iptables(4), 6: new Iptables(6) };

/** Runs one firewall driver call, turning a FirewallError into the CNI firewall error (code 104). */
export async function firewallCall<T>(p: () => Promise<T>): Promise<T> {
  try {
    return await p();
  } catch (e) {
    if (e instanceof FirewallError) {
      throw new CniError(ErrCode.IptablesFailure, `${e.tool} failed`, e.message);
    }
    throw e;
  }
}

function save(fam: 4 | 6): Promise<string> {
  return firewallCall(() => IPT[fam].save("nat"));
}

function restore(fam: 4 | 6, text: string): Promise<void> {
  return firewallCall(() => IPT[fam].restore(text));
}

/** The iptables-restore input that creates the chain for `addrs` (CIDRs with host part). */
export function setupRules(addrs: string[], chain: string, cmt: string): Map<4 | 6, string> {
  const byFam = new Map<4 | 6, string[]>();
  const c = quote(cmt);
  for (const a of addrs) {
    const net = IPNet.parse(a, "ip");
    const fam = net.family;
    const ip = a.split("/")[0];
    const mcast = fam === 4 ? "224.0.0.0/4" : "ff00::/8";
    const lines = byFam.get(fam) ?? [`:${chain} - [0:0]`];
    lines.push(
      `-A ${chain} -d ${net} -m comment --comment ${c} -j ACCEPT`,
      `-A ${chain} ! -d ${mcast} -m comment --comment ${c} -j MASQUERADE`,
      `-A POSTROUTING -s ${ip}/${fam === 4 ? 32 : 128} -m comment --comment ${c} -j ${chain}`,
    );
    byFam.set(fam, lines);
  }
  const out = new Map<4 | 6, string>();
  for (const [fam, lines] of byFam) out.set(fam, `*nat\n${lines.join("\n")}\nCOMMIT\n`);
  return out;
}

/** Creates the chain and its rules (one iptables-restore per family). */
export async function setupMasq(addrs: string[], chain: string, cmt: string): Promise<void> {
  for (const [fam, text] of setupRules(addrs, chain, cmt)) {
    await restore(fam, text);
  }
}

/** From `iptables-save -t nat` text: the restore input that removes `chain` and the jumps to it, or null. */
export function teardownRules(saved: string, chain: string): string | null {
  const lines = removeChainLines(splitSave(saved).get("nat") ?? [], [chain]);
  return lines.length ? restoreText(new Map([["nat", lines]])) : null;
}

/**
 * Removes the chain and every jump to it, for each family; a chain that is not there is fine. With the
 * container's addresses (`addrs`, CIDRs) and the rule comment, one `iptables-restore` deletes the exact
 * rules ADD made; when that fails (rules already gone, or no addresses known) the jumps are found by chain
 * name in `iptables-save`.
 */
export async function teardownMasq(
  chain: string,
  families: (4 | 6)[],
  addrs: string[] = [],
  cmt = "",
): Promise<void> {
  for (const fam of families) {
    const mine = addrs.filter((a) => (a.includes(":") ? 6 : 4) === fam);
    if (mine.length && cmt) {
      const lines = mine.map((a) =>
        `-D POSTROUTING -s ${a.split("/")[0]}/${fam === 4 ? 32 : 128} -m comment --comment ${
          quote(cmt)
        } -j ${chain}`
      );
      try {
        await restore(fam, `*nat\n${lines.join("\n")}\n-F ${chain}\n-X ${chain}\nCOMMIT\n`);
        continue;
      } catch { /* fall back to the search by chain name */ }
    }
    const text = teardownRules(await save(fam), chain);
    if (text) await restore(fam, text);
  }
}

/** True when the chain exists with a jump from POSTROUTING for `ip` (CHECK). */
export async function masqPresent(chain: string, ip: string): Promise<boolean> {
  const fam = ip.includes(":") ? 6 : 4;
  const saved = await save(fam);
  const host = `${ip}/${fam === 4 ? 32 : 128}`;
  return saved.includes(`:${chain} `) &&
    saved.split("\n").some((l) => l.startsWith(`-A POSTROUTING -s ${host} `) && l.endsWith(` -j ${chain}`));
}

/**
 * GC: removes the masquerade chains of network `network` whose container ID is not in `keep` (found by the
 * reference-format comment on the POSTROUTING jump). Returns the chains removed.
 */
export async function gcMasq(network: string, keep: Set<string>, families: (4 | 6)[]): Promise<string[]> {
  const removed: string[] = [];
  for (const fam of families) {
    const saved = await save(fam);
    const re = /^-A POSTROUTING .*--comment "name: \\"([^"\\]*)\\" id: \\"([^"\\]*)\\"" -j (CNI-[0-9a-f]+)$/;
    const chains = new Set<string>();
    for (const l of saved.split("\n")) {
      const m = re.exec(l);
      if (m && m[1] === network && !keep.has(m[2])) chains.add(m[3]);
    }
    const text = [...chains].map((c) => teardownRules(saved, c)).filter((t): t is string => t !== null)
      .map((t) => t.slice("*nat\n".length, -"COMMIT\n".length)).join("");
    if (text) {
      await restore(fam, `*nat\n${text}COMMIT\n`);
      removed.push(...chains);
    }
  }
  return removed;
}
