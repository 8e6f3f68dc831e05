/**
 * The doctor's check ids: the one list every check definition, finding, `--skip` value and test is typed
 * against, in the order the checks run; old ids kept as aliases for `--skip`.
 * @module
 */
import { UsageError } from "../base/errors.ts";

/** Every check id, in run order (lib/doctor/mod.ts's ALL_CHECKS follows it; a test holds them equal). */
export const CHECK_IDS = [
  "daemon",
  "ip-forward",
  "br-netfilter",
  "rp-filter",
  "ipv6",
  "neigh-gc",
  "conntrack",
  "forward-policy",
  "masq-rules",
  "iptables-backend",
  "nft-rules",
  "firewall-mode",
  "hostports",
  "netpol",
  "vxlan-module",
  "flannel-device",
  "vtep-mac",
  "vxlan-csum-offload",
  "vxlan-port",
  "mtu",
  "udp-device",
  "udp-port",
  "udp-leftover",
  "wg-device",
  "wg-key",
  "wg-peers",
  "wg-handshake",
  "peer-routes",
  "peer-arp",
  "peer-fdb",
  "peer-entries",
  "subnet-env",
  "cni0-address",
  "store",
  "lease-own",
  "lease-unique",
  "lease-expiry",
  "public-ip",
  "pod-network-routes",
  "cni-config",
  "cni-binaries",
  "veths",
  "hostlocal-ips",
  "pod-netns",
  "cni-cache",
  "hairpin",
  "cri-sandboxes",
  "networkmanager",
  "ipv6-forward",
  "ipv6-path",
  "flannel-v6-device",
  "peers-v6",
  "ip6tables-masq",
  "readyz",
  "peer-probe",
] as const;

/** A check's id. */
export type CheckId = typeof CHECK_IDS[number];

/** A finding's id: its check's, or `doctor` for what stopped the doctor itself (exit 3). */
export type FindingId = CheckId | "doctor";

/** Old check ids that read as failures when ok → their current ids (old ones stay valid for --skip). */
export const OLD_IDS: Readonly<Record<string, CheckId>> = {
  "peer-route-missing": "peer-routes",
  "peer-arp-missing": "peer-arp",
  "peer-fdb-missing": "peer-fdb",
  "stale-peer-entries": "peer-entries",
  "veth-orphan": "veths",
  "hostlocal-leak": "hostlocal-ips",
  "netns-leak": "pod-netns",
  "cni-cache-stale": "cni-cache",
  "lease-duplicate": "lease-unique",
  "route-overlap": "pod-network-routes",
  "iptables-mixed": "iptables-backend",
  "ipv6-disabled": "ipv6",
  "firewall-mixed": "firewall-mode",
  "hostport-stale": "hostports",
};

/** `id` as a check id (an old alias maps to its current id), or null when it names no check. */
export function checkId(id: string): CheckId | null {
  if (Object.hasOwn(OLD_IDS, id)) return OLD_IDS[id];
  return (CHECK_IDS as readonly string[]).includes(id) ? id as CheckId : null;
}

/**
 * The check ids of flag `flag`'s comma-separated `text` (blank items dropped, aliases mapped). Throws
 * {@link UsageError} naming the flag, the id and the valid ones for anything else.
 */
export function parseCheckIds(flag: string, text: string): Set<CheckId> {
  const out = new Set<CheckId>();
  for (const raw of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const id = checkId(raw);
    if (id === null) {
      throw new UsageError(
        `${flag}: unknown check id '${raw.slice(0, 64)}' (known: ${CHECK_IDS.join(", ")}; old aliases: ${
          Object.keys(OLD_IDS).join(", ")
        })`,
      );
    }
    out.add(id);
  }
  return out;
}
