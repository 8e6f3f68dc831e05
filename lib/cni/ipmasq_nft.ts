/**
 * The bridge plugin's masquerade rules with `"ipMasqBackend": "nftables"`, as the reference's pkg/ip (v1.10,
 * through knftables) makes them: table `inet cni_plugins_masquerade`, base chain `postrouting` (nat,
 * postrouting, priority 100 = srcnat) that returns for multicast and goes to chain `masq_checks`, where each
 * container address has one rule `ip saddr == <ip> ip daddr != <subnet> masquerade`, commented
 * `<sha512(network) hex, 16>-<sha512(ifname:containerID) hex, 16>, net: …, if: …, id: …` (at most 128
 * bytes). Rules are found by that comment's hash prefix, so the reference's DEL and GC remove ours and ours
 * remove the reference's. Every change is one nft transaction (the firewall layer's driver).
 * @module
 */
import { IPNet } from "../base/cidr.ts";
import { isNotFound, type NftDriver, nftQuote } from "../firewall/nft.ts";

/** The reference's table (family inet) and its chains. */
export const NFT_MASQ_TABLE = "cni_plugins_masquerade";
const CHECKS = "masq_checks";
const T = `inet ${NFT_MASQ_TABLE}`;
/** knftables' CommentLengthMax: the kernel keeps 128 bytes of a rule's comment. */
const COMMENT_MAX = 128;

async function hash16(s: string): Promise<string> {
  const h = new Uint8Array(await crypto.subtle.digest("SHA-512", new TextEncoder().encode(s)));
  return Array.from(h.subarray(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The prefix of every rule comment of `network` (the reference's hashForNetwork). */
export function networkTag(network: string): Promise<string> {
  return hash16(network);
}

/** The prefix of the comment of the rules of one attachment (the reference's hashForInstance). */
export async function instanceTag(network: string, ifname: string, containerId: string): Promise<string> {
  return `${await hash16(network)}-${await hash16(`${ifname}:${containerId}`)}`;
}

/** The rule comment of one attachment: its tag, then who it is, `"` removed, cut to 128 bytes. */
export async function nftComment(network: string, ifname: string, containerId: string): Promise<string> {
  const strip = (s: string) => s.replaceAll('"', "");
  const full = `${await instanceTag(network, ifname, containerId)}, net: ${strip(network)}, if: ${
    strip(ifname)
  }, id: ${strip(containerId)}`;
  const bytes = new TextEncoder().encode(full);
  if (bytes.length <= COMMENT_MAX) return full;
  let end = COMMENT_MAX;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--; // not inside a UTF-8 sequence
  return new TextDecoder().decode(bytes.subarray(0, end));
}

/** One rule of `masq_checks`, as the JSON listing gives it. */
export interface MasqRule {
  handle: number;
  comment?: string;
  expr?: unknown[];
}

/**
 * The transaction that makes the table and chains (when missing), refills `postrouting`, deletes the
 * attachment's `stale` rules (handles) and adds one rule per address (`addrs`: CIDRs with the host part).
 */
export function nftSetupScript(addrs: string[], comment: string, stale: number[]): string {
  const out = [
    `add table ${T} { comment "Masquerading for plugins from github.com/containernetworking/plugins" ; }`,
    `add chain ${T} ${CHECKS} { comment "Masquerade traffic from certain IPs to any (non-multicast) IP outside their subnet" ; }`,
    `add chain ${T} postrouting { type nat hook postrouting priority 100 ; }`,
    `flush chain ${T} postrouting`,
    `add rule ${T} postrouting ip daddr == 224.0.0.0/4  return`,
    `add rule ${T} postrouting ip6 daddr == ff00::/8  return`,
    `add rule ${T} postrouting goto ${CHECKS}`,
    ...stale.map((h) => `delete rule ${T} ${CHECKS} handle ${h}`),
  ];
  for (const a of addrs) {
    const { ip, net } = IPNet.parseWithHost(a, "ip");
    const f = net.family === 4 ? "ip" : "ip6";
    out.push(
      `add rule ${T} ${CHECKS} ${f} saddr == ${ip} ${f} daddr != ${net} masquerade comment ${
        nftQuote(comment)
      }`,
    );
  }
  return out.join("\n") + "\n";
}

/** The rules of `masq_checks` (JSON listing with handles); none when the table or chain is not there. */
export async function listMasqRules(nft: NftDriver): Promise<MasqRule[]> {
  let out: string;
  try {
    out = await nft.run(`list chain ${T} ${CHECKS}\n`, { json: true, handles: true });
  } catch (e) {
    if (isNotFound(e)) return [];
    throw e;
  }
  const items = (JSON.parse(out) as { nftables?: Record<string, unknown>[] }).nftables ?? [];
  const rules: MasqRule[] = [];
  for (const o of items) {
    const r = o.rule as Record<string, unknown> | undefined;
    if (!r || typeof r.handle !== "number" || r.chain !== CHECKS) continue;
    rules.push({
      handle: r.handle,
      comment: typeof r.comment === "string" ? r.comment : undefined,
      expr: Array.isArray(r.expr) ? r.expr : undefined,
    });
  }
  return rules;
}

/** The rules whose comment starts with `tag`. */
export function tagged(rules: MasqRule[], tag: string): MasqRule[] {
  return rules.filter((r) => r.comment?.startsWith(tag));
}

/** The source address a rule matches (`ip saddr == X`), from its JSON expression; null when none. */
export function ruleSource(r: MasqRule): string | null {
  for (const e of r.expr ?? []) {
    const m = (e as { match?: { left?: { payload?: { field?: unknown } }; right?: unknown } }).match;
    if (m?.left?.payload?.field === "saddr" && typeof m.right === "string") return m.right;
  }
  return null;
}

/** The transaction that deletes `rules` (by handle), or null when there are none. */
export function nftDeleteScript(rules: MasqRule[]): string | null {
  if (!rules.length) return null;
  return rules.map((r) => `delete rule ${T} ${CHECKS} handle ${r.handle}`).join("\n") + "\n";
}

/** ADD: the attachment's rules, replacing any it had (as the reference: stale rules of the same tag go). */
export async function setupMasqNft(
  nft: NftDriver,
  addrs: string[],
  network: string,
  ifname: string,
  containerId: string,
): Promise<void> {
  const stale = tagged(await listMasqRules(nft), await instanceTag(network, ifname, containerId));
  const comment = await nftComment(network, ifname, containerId);
  await nft.run(nftSetupScript(addrs, comment, stale.map((r) => r.handle)));
}

/** DEL: removes the attachment's rules; none there (or no table) is fine. Returns how many went. */
export async function teardownMasqNft(
  nft: NftDriver,
  network: string,
  ifname: string,
  containerId: string,
): Promise<number> {
  const mine = tagged(await listMasqRules(nft), await instanceTag(network, ifname, containerId));
  const text = nftDeleteScript(mine);
  if (text) await nft.run(text);
  return mine.length;
}

/** CHECK: whether the attachment has its rule for address `ip`. */
export async function masqPresentNft(
  nft: NftDriver,
  network: string,
  ifname: string,
  containerId: string,
  ip: string,
): Promise<boolean> {
  const mine = tagged(await listMasqRules(nft), await instanceTag(network, ifname, containerId));
  return mine.some((r) => ruleSource(r) === ip);
}

/**
 * GC: removes `network`'s rules whose attachment is not in `keep` (container ID and interface). Compared by
 * the comment's tag, so a comment the kernel kept differently (cut, or quoted) is not taken for a stale one.
 * Returns how many went.
 */
export async function gcMasqNft(
  nft: NftDriver,
  network: string,
  keep: { containerId: string; ifname: string }[],
): Promise<number> {
  const ours = tagged(await listMasqRules(nft), `${await networkTag(network)}-`);
  if (!ours.length) return 0;
  const valid = new Set(await Promise.all(keep.map((k) => instanceTag(network, k.ifname, k.containerId))));
  const gone = ours.filter((r) => !valid.has(r.comment!.slice(0, 33)));
  const text = nftDeleteScript(gone);
  if (text) await nft.run(text);
  return gone.length;
}
