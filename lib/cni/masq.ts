/**
 * The bridge plugin's ipMasq through the backend its config names (`ipMasqBackend`), as the reference's
 * pkg/ip: ADD programs the one backend (`iptables`: lib/cni/ipmasq.ts; `nftables`: lib/cni/ipmasq_nft.ts;
 * absent: iptables, unless its tools are not installed and nftables is there), CHECK looks there. GC
 * cleans up both, as the reference's DEL and GC do (the container may have been added by another version
 * or config); a backend that is not installed is no error there. Our DEL looks in iptables always and in
 * nftables when the config's backend is nftables: every nft look loads libnftables into the plugin's
 * process (15-20 ms per DEL, measured), which a node that never uses the backend would pay on every pod.
 * @module
 */
import { onPath } from "../base/exists.ts";
import { tools } from "../firewall/iptables.ts";
import { type NftDriver, nftDriver } from "../firewall/nft.ts";
import { nftLibrary } from "../os/nftables.ts";
import { log } from "./skel.ts";
import { firewallCall } from "./ipmasq.ts";
import { CniError, ErrCode } from "./spec.ts";

/** The two backends. */
export type MasqBackend = "iptables" | "nftables";

/** Who the rules are for. */
export interface Attachment {
  network: string;
  ifname: string;
  containerId: string;
}

/** Whether the iptables tools of `fam` are installed. */
function iptablesThere(fam: 4 | 6): boolean {
  return onPath(tools(fam).save) && onPath(tools(fam).restore);
}

let driver: NftDriver | null = null;
function nftd(): NftDriver {
  return driver ??= nftDriver({ log: { info: (m) => log("bridge", m), warn: (m) => log("bridge", m) } });
}

/**
 * The backend ADD uses: the config's (`iptables` or `nftables`), else iptables unless its tools are not
 * installed and nftables is (libnftables or the nft binary). Another name is the reference's error.
 */
export function masqBackend(configured: string | null): MasqBackend {
  if (configured === "iptables" || configured === "nftables") return configured;
  if (configured !== null) {
    throw new CniError(
      ErrCode.InvalidNetworkConfig,
      `unknown ipmasq backend ${JSON.stringify(configured)}`,
      'ipMasqBackend must be "iptables" or "nftables"',
    );
  }
  return !iptablesThere(4) && (nftLibrary() !== null || onPath("nft")) ? "nftables" : "iptables";
}

/** ADD: the rules for `addrs` (CIDRs with the host part) in `backend`. */
export async function masqSetup(backend: MasqBackend, a: Attachment, addrs: string[]): Promise<void> {
  if (backend === "nftables") {
    const { setupMasqNft } = await import("./ipmasq_nft.ts");
    await firewallCall(() => setupMasqNft(nftd(), addrs, a.network, a.ifname, a.containerId));
    return;
  }
  const { chainName, comment, setupMasq } = await import("./ipmasq.ts");
  await setupMasq(addrs, await chainName(a.network, a.containerId), comment(a.network, a.containerId));
}

/** Whether DEL looks in nftables: the config's backend is nftables (named, or the default here). */
export function delLooksInNft(configured: string | null): boolean {
  return configured === "nftables" || (configured === null && masqBackend(null) === "nftables");
}

/**
 * DEL (and ADD's undo): removes the attachment's rules in iptables (`families`; `addrs`, CIDRs, when known,
 * name the exact rules) and, with `nft`, in nftables.
 */
export async function masqTeardown(
  a: Attachment,
  families: (4 | 6)[],
  addrs: string[],
  nft: boolean,
): Promise<void> {
  if (nft) {
    const { teardownMasqNft } = await import("./ipmasq_nft.ts");
    try {
      await firewallCall(() => teardownMasqNft(nftd(), a.network, a.ifname, a.containerId));
    } catch (e) {
      if (!nftMissing(e)) throw e;
    }
  }
  const fams = families.filter(iptablesThere);
  if (!fams.length) return;
  const { chainName, comment, teardownMasq } = await import("./ipmasq.ts");
  await teardownMasq(
    await chainName(a.network, a.containerId),
    fams,
    addrs,
    comment(a.network, a.containerId),
  );
}

/** True for the error of an nft that is not installed (neither libnftables nor the binary). */
function nftMissing(e: unknown): boolean {
  return e instanceof CniError && nftLibrary() === null && !onPath("nft");
}

/** CHECK: the first of `ips` (addresses) without its rule in `backend`, as a message; null when all have one. */
export async function masqMissing(
  backend: MasqBackend,
  a: Attachment,
  ips: string[],
): Promise<string | null> {
  if (backend === "nftables") {
    const { masqPresentNft } = await import("./ipmasq_nft.ts");
    for (const ip of ips) {
      if (!(await firewallCall(() => masqPresentNft(nftd(), a.network, a.ifname, a.containerId, ip)))) {
        return `nftables masquerade rule for ${ip} missing`;
      }
    }
    return null;
  }
  const { chainName, masqPresent } = await import("./ipmasq.ts");
  const chain = await chainName(a.network, a.containerId);
  for (const ip of ips) {
    if (!(await masqPresent(chain, ip))) return `masquerade chain ${chain} missing`;
  }
  return null;
}

/** GC: removes `network`'s rules of attachments not in `keep`, in both backends. */
export async function masqGc(
  network: string,
  keep: { containerId: string; ifname: string }[],
  families: (4 | 6)[],
): Promise<void> {
  const { gcMasqNft } = await import("./ipmasq_nft.ts");
  try {
    await firewallCall(() => gcMasqNft(nftd(), network, keep));
  } catch (e) {
    if (!nftMissing(e)) throw e;
  }
  const fams = families.filter(iptablesThere);
  if (!fams.length) return;
  const { gcMasq } = await import("./ipmasq.ts");
  await gcMasq(network, new Set(keep.map((k) => k.containerId)), fams);
}
