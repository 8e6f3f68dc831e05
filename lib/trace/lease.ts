/**
 * The leases of a trace: which lease explains a destination address, which traced node holds a lease,
 * and how a hop names the lease that explains it (`10.244.1.0/24 → node2, PublicIP 192.0.2.2, VtepMAC
 * …`), for the IPv4 walk (subnet, PublicIP, BackendData) and the IPv6 walk (ipv6Subnet, PublicIPv6,
 * BackendV6Data).
 * @module
 */
import type { IPAddr } from "../base/cidr.ts";
import type { Lease } from "../store/types.ts";
import type { NodeSnapshot } from "../observe/snapshot.ts";
import type { TraceNode } from "./types.ts";
import { own6 } from "../observe/probes.ts";
import { vtepMacOf } from "../lease/backend_data.ts";

/** The lease whose subnet holds `ip`, or null. */
export function leaseFor(ctx: NodeSnapshot, ip: IPAddr): Lease | null {
  return ctx.store.leases.find((l) => l.subnet?.contains(ip)) ?? null;
}

/** The lease whose IPv6 subnet holds `ip`, or null. */
export function lease6For(ctx: NodeSnapshot, ip: IPAddr): Lease | null {
  return ctx.store.leases.find((l) => l.ipv6Subnet?.contains(ip)) ?? null;
}

/** The node whose lease this is: its subnet.env subnet or its own lease matches. */
export function nodeOfLease(nodes: TraceNode[], l: Lease): TraceNode | null {
  return nodes.find((n) => !!l.subnet && n.ctx.nodeSubnet?.equals(l.subnet)) ?? null;
}

/** The node of a lease by its IPv6 subnet (IPv6-only leases have no IPv4 subnet). */
export function nodeOf6(nodes: TraceNode[], l: Lease): TraceNode | null {
  return nodeOfLease(nodes, l) ?? nodes.find((n) => !!l.ipv6Subnet && own6(n.ctx)?.equals(l.ipv6Subnet)) ??
    null;
}

/** A lease as the IPv4 walk's hops name it: subnet → node, PublicIP, VtepMAC. */
export function leaseText(nodes: TraceNode[], l: Lease): string {
  const mac = vtepMacOf(l.attrs.BackendData);
  const who = nodeOfLease(nodes, l)?.name;
  return `${l.subnet} → ${who ? `${who}, ` : ""}PublicIP ${l.attrs.PublicIP}` +
    (mac ? `, VtepMAC ${mac}` : "");
}

/** A lease as the IPv6 walk's hops name it: IPv6 subnet → node, PublicIPv6, IPv6 VtepMAC. */
export function leaseText6(nodes: TraceNode[], l: Lease): string {
  const mac = vtepMacOf(l.attrs.BackendV6Data);
  const who = nodeOf6(nodes, l)?.name;
  return `${l.ipv6Subnet} → ${who ? `${who}, ` : ""}PublicIPv6 ${l.attrs.PublicIPv6 ?? "-"}` +
    (mac ? `, VtepMAC ${mac}` : "");
}
