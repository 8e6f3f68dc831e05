/**
 * A dual-stack `lab up --kube --ip-family dual` cluster, as Kubernetes' dual-stack documentation and
 * kube-flannel's lay it out: the API server and kube-controller-manager with an IPv4 and an IPv6 service
 * range, kube-controller-manager's `--cluster-cidr` IPv4,IPv6 with a mask size per family (a /64 per node from
 * the lab's IPv6 pod network, {@link LAB_IPV6_NETWORK}), kubelet's `--node-ip` IPv4,IPv6, kube-proxy's
 * `clusterCIDR` with both, and flanctl's net-conf with `EnableIPv6` and `IPv6Network` (the manifest's
 * ConfigMap, rewritten before it is applied). The IPv6 underlay is the one of the other labs' `dual` family
 * (lib/lab/family.ts: fc00:1ab:X::/64).
 * @module
 */
import { FlanctlError, UsageError } from "../base/errors.ts";
import { LAB_IPV6_NETWORK } from "./family.ts";

/** The address families a --kube lab offers (`lab up --kube --ip-family`). */
export type KubeIpFamily = "ipv4" | "dual";
/** The IPv4 service network and the API server's service VIP (its first address). */
export const SERVICE_CIDR = "10.96.0.0/16";
export const SERVICE_VIP = "10.96.0.1";
/** The IPv6 service network of a dual-stack lab (a /112: the API server takes at most 20 host bits). */
export const SERVICE_CIDR6 = "fd00:10:96::/112";
/** The API server's IPv6 service VIP (the IPv6 range's first address). */
export const SERVICE_VIP6 = "fd00:10:96::1";
/** Each node's podCIDR sizes: a /24 of the IPv4 network, a /64 of the IPv6 one. */
export const NODE_MASK4 = 24;
export const NODE_MASK6 = 64;

/** The families of a --kube lab, refusing what it cannot build (an IPv6-only cluster). */
export function kubeFamily(f: string | undefined): KubeIpFamily {
  if (f === undefined || f === "ipv4" || f === "dual") return f ?? "ipv4";
  throw new UsageError(`lab up --kube: --ip-family ${f} is not offered (ipv4 or dual)`);
}

/** The cluster's pod networks (kube-controller-manager's --cluster-cidr, kube-proxy's clusterCIDR). */
export function clusterCidrs(family: KubeIpFamily, v4: string): string[] {
  return family === "dual" ? [v4, LAB_IPV6_NETWORK] : [v4];
}

/** The service networks (the API server's and kube-controller-manager's --service-cluster-ip-range). */
export function serviceCidrs(family: KubeIpFamily): string[] {
  return family === "dual" ? [SERVICE_CIDR, SERVICE_CIDR6] : [SERVICE_CIDR];
}

/** kube-controller-manager's node CIDR flags: one mask size per family in dual stack (the single one refused). */
export function nodeMaskFlags(family: KubeIpFamily): string[] {
  return family === "dual"
    ? [`--node-cidr-mask-size-ipv4=${NODE_MASK4}`, `--node-cidr-mask-size-ipv6=${NODE_MASK6}`]
    : [`--node-cidr-mask-size=${NODE_MASK4}`];
}

/** The net-conf.json of a manifest's ConfigMap (the indented block after `net-conf.json: |`), or null. */
export function manifestNetConf(manifest: string): string | null {
  const lines = manifest.split("\n");
  const at = lines.findIndex((l) => /^\s+net-conf\.json: \|/.test(l));
  if (at < 0) return null;
  const indent = /^\s*/.exec(lines[at])![0].length;
  const body: string[] = [];
  for (const l of lines.slice(at + 1)) {
    if (l.trim() && /^\s*/.exec(l)![0].length <= indent) break;
    body.push(l);
  }
  const text = body.join("\n").trim();
  return text ? text + "\n" : null;
}

/**
 * The manifest with its net-conf.json made dual stack, as kube-flannel's documentation writes it:
 * `"EnableIPv6": true` and `"IPv6Network"` next to the `"Network"` line. A manifest whose net-conf has no
 * `"Network"` line, or already names IPv6, is refused (the lab would not know what it runs).
 */
export function dualStackManifest(manifest: string, v6 = LAB_IPV6_NETWORK): string {
  if (/"(EnableIPv6|IPv6Network)"/.test(manifest)) {
    throw new FlanctlError("lab up --kube --ip-family dual: the manifest's net-conf already sets IPv6", 1);
  }
  // The indent, the member and its comma (white space around the comma allowed; blank lines above kept).
  const re = /^([ \t]*)("Network"\s*:\s*"[0-9./]+")[ \t]*(,?)[ \t]*$/m;
  const m = re.exec(manifest);
  if (!m) {
    throw new FlanctlError('lab up --kube --ip-family dual: the manifest has no net-conf "Network" line', 1);
  }
  const [, ind, member, comma] = m;
  return manifest.replace(
    re,
    `${ind}${member},\n${ind}"EnableIPv6": true,\n${ind}"IPv6Network": ${JSON.stringify(v6)}${comma}`,
  );
}
