/**
 * libnftables alone (lib/sys/nftables.ts), for callers that pay for every module they load: a CNI call is a
 * fresh process, and lib/os/mod.ts would bring exec, malloc, namespaces, TUN and unix datagrams with it
 * (lib/firewall/nft.ts, loaded by portmap and the bridge's masquerade). Everyone else uses lib/os/mod.ts,
 * which exports the same functions.
 * @module
 */
export { nftLibrary, releaseNftLibrary } from "../sys/nftables.ts";
export type { NftLibrary, NftRunOptions, NftRunResult } from "../sys/nftables.ts";
