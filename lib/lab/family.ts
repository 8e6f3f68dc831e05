/**
 * The lab's address families (`lab up --ip-family ipv4|dual|ipv6`): ULA addresses for the underlay next to
 * its IPv4 ones (fc00:1ab:X::/64, X from the lab name as the IPv4 underlay's third octet), the IPv6 pod
 * network fc00:244::/48, the net-conf for each family, and reading a pod's IPv6 address. The IPv4 underlay
 * stays in every mode (etcd listens on it); in `ipv6` the overlay, the leases and the pods are IPv6-only.
 * @module
 */
import { UsageError } from "../base/errors.ts";
import { IPNet } from "../base/cidr.ts";
import { parseNetConfig } from "../config/netconf.ts";
import { underlayOctet } from "./paths.ts";
import { inNs, mustRun, runCmd } from "./proc.ts";
import { sleep } from "../base/sleep.ts";
import type { LabState, NodeState } from "./types.ts";

/** `--ip-family`. */
export type LabIpFamily = "ipv4" | "dual" | "ipv6";
/** The values of `--ip-family`. */
export const LAB_IP_FAMILIES: readonly LabIpFamily[] = ["ipv4", "dual", "ipv6"];
/** The lab's IPv6 pod network (net-conf IPv6Network), a ULA prefix. */
export const LAB_IPV6_NETWORK = "fc00:244::/48";

/** Checks `--ip-family`; throws a UsageError naming the flag. */
export function validateIpFamily(f: unknown): void {
  if (f !== undefined && !(LAB_IP_FAMILIES as readonly unknown[]).includes(f)) {
    throw new UsageError(`--ip-family '${f}': use ipv4, dual or ipv6`);
  }
}

/** The family of a lab (states written before --ip-family are ipv4). */
export function familyOf(s: Pick<LabState, "ipFamily">): LabIpFamily {
  return s.ipFamily ?? "ipv4";
}

/** True when the lab's overlay has IPv6. */
export function hasV6(s: Pick<LabState, "ipFamily">): boolean {
  return familyOf(s) !== "ipv4";
}

/** IPv6 underlay of lab `name`: prefix, gateway (on the bridge) and node `i`'s public IPv6 (1-based). */
export function underlayAddrs6(
  name: string,
): { cidr: string; gateway: string; nodeIP: (i: number) => string } {
  const x = underlayOctet(name).toString(16);
  return {
    cidr: `fc00:1ab:${x}::/64`,
    gateway: `fc00:1ab:${x}::1`,
    nodeIP: (i) => `fc00:1ab:${x}::${(10 + i).toString(16)}`,
  };
}

/** The net-conf.json of a lab for its family. */
export function labNetConfFor(s: Pick<LabState, "network" | "backend" | "ipFamily">): string {
  const f = familyOf(s);
  if (f === "ipv4") return JSON.stringify({ Network: s.network, Backend: { Type: s.backend } });
  return JSON.stringify({
    ...(f === "dual" ? { Network: s.network } : { EnableIPv4: false }),
    EnableIPv6: true,
    IPv6Network: LAB_IPV6_NETWORK,
    Backend: { Type: s.backend },
  });
}

/**
 * The lab's pod networks, IPv4 then IPv6, as its net-conf has them (an IPv6-only lab has no IPv4 one; its
 * `network` is only the unused --network default).
 */
export function labNetworks(s: Pick<LabState, "network" | "ipFamily" | "netConf">): string[] {
  const f = familyOf(s);
  const v6 = s.netConf
    ? parseNetConfig(s.netConf).ipv6Network?.toString() ?? LAB_IPV6_NETWORK
    : LAB_IPV6_NETWORK;
  return [...(f !== "ipv6" ? [s.network] : []), ...(f !== "ipv4" ? [v6] : [])];
}

/** Adds the IPv6 gateway to the underlay bridge and lets the underlay forward IPv6. */
export async function addUnderlayV6(s: LabState): Promise<void> {
  const u = underlayAddrs6(s.name);
  await mustRun([
    "ip",
    "-n",
    s.underlay.netns,
    "addr",
    "add",
    `${u.gateway}/64`,
    "dev",
    s.underlay.bridge,
    "nodad",
  ]);
  await mustRun(inNs(s.underlay.netns, ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]));
}

/** Gives node `n` (index `i`) its public IPv6, an IPv6 default route via the bridge, and IPv6 forwarding. */
export async function addNodeV6(s: LabState, n: NodeState, i: number): Promise<void> {
  const u = underlayAddrs6(s.name);
  n.publicIPv6 = u.nodeIP(i);
  await mustRun(["ip", "-n", n.netns, "addr", "add", `${n.publicIPv6}/64`, "dev", "eth0", "nodad"]);
  await mustRun(["ip", "-n", n.netns, "-6", "route", "add", "default", "via", u.gateway, "dev", "eth0"]);
  await mustRun(inNs(n.netns, ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]));
}

/** The global IPv6 address of eth0 in `netns`, or null. */
export async function podIPv6(netns: string): Promise<string | null> {
  const r = await runCmd(["ip", "-n", netns, "-j", "-6", "addr", "show", "dev", "eth0", "scope", "global"]);
  if (r.code !== 0 || !r.stdout.trim()) return null;
  const j = JSON.parse(r.stdout) as { addr_info?: { local: string }[] }[];
  return j[0]?.addr_info?.[0]?.local ?? null;
}

/** The node's IPv6 subnet (network/prefix) from its subnet.env text, or null. */
export function subnet6FromEnv(text: string): string | null {
  const m = /^FLANNEL_IPV6_SUBNET=(\S+)$/m.exec(text);
  return m ? IPNet.tryParse(m[1])?.toString() ?? null : null;
}

/**
 * Waits (up to `timeoutMs`) until no node's cni0 holds a tentative IPv6 address. The bridge plugin, like
 * the reference, leaves the gateway address to IPv6 duplicate address detection, so for a second or two
 * after the first pod of a node the pods' IPv6 gateway does not answer; the lab's ping check waits it out.
 */
export async function waitBridgesSettled(s: LabState, timeoutMs = 8000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (const n of s.nodes) {
    while (Date.now() < end) {
      const r = await runCmd(["ip", "-n", n.netns, "-6", "addr", "show", "dev", "cni0", "tentative"]);
      if (r.code !== 0 || !r.stdout.trim()) break;
      await sleep(100);
    }
  }
}
