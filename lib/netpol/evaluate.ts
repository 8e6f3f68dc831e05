/**
 * The API's verdict for one packet, straight from the model (no dataplane): which policies isolate the
 * source for egress and the destination for ingress, and which rule (if any) allows each side. The
 * compiler (plan.ts) must agree with it; trace names its deciding policy and rule.
 * @module
 */
import type { IPAddr } from "../base/cidr.ts";
import {
  keyOf,
  matches,
  type Namespace,
  type Peer,
  type Pod,
  type Policy,
  type PolicyPort,
  type Proto,
} from "./model.ts";

/** What the cluster holds: pods, namespaces and policies by key (`ns/name`, namespaces by name). */
export interface Cluster {
  pods: ReadonlyMap<string, Pod>;
  namespaces: ReadonlyMap<string, Namespace>;
  policies: ReadonlyMap<string, Policy>;
}

/** A packet's protocol: the three a policy can name, or another (ICMP…), which only a portless rule allows. */
export type PacketProto = Proto | "other";

/** One side's decision. */
export interface Decision {
  /** True when a policy selects the pod for this direction. */
  isolated: boolean;
  allowed: boolean;
  /** The first allowing policy and rule index, when isolated and allowed. */
  by?: { policy: string; rule: number };
  /** The policies isolating the pod for this direction (keys, sorted). */
  policies: string[];
}

/** A packet's verdict: both sides must allow. */
export interface Verdict {
  allowed: boolean;
  egress: Decision;
  ingress: Decision;
}

/** True for a pod that policy applies to: not hostNetwork, not finished. */
export function isPolicyPod(p: Pod): boolean {
  return !p.hostNetwork && !p.terminal;
}

/** True when `pol` selects `pod` (same namespace, podSelector matches). */
export function selects(pol: Policy, pod: Pod): boolean {
  return isPolicyPod(pod) && pod.namespace === pol.namespace && matches(pol.podSelector, pod.labels);
}

/** True when a selector peer (not an ipBlock) of a policy in `policyNs` matches `pod`. */
export function peerSelectsPod(
  peer: Peer,
  policyNs: string,
  pod: Pod,
  namespaces: ReadonlyMap<string, Namespace>,
): boolean {
  if (peer.ipBlock || !isPolicyPod(pod)) return false;
  if (peer.namespaceSelector) {
    const ns = namespaces.get(pod.namespace);
    if (!ns || !matches(peer.namespaceSelector, ns.labels)) return false;
  } else if (pod.namespace !== policyNs) return false;
  return !peer.podSelector || matches(peer.podSelector, pod.labels);
}

/** The port a policy port names on `pod` (a named port resolved through its containers), or null. */
export function resolvePort(pp: PolicyPort, pod: Pod | undefined): [number, number] | null | "any" {
  if (pp.port === undefined) return "any";
  if (typeof pp.port === "number") return [pp.port, pp.endPort ?? pp.port];
  const c = pod?.ports.find((x) => x.name === pp.port && x.protocol === pp.protocol);
  return c ? [c.port, c.port] : null;
}

/** The policy pods holding `ip`, sorted by key (normally one). */
export function podsByIp(c: Cluster, ip: IPAddr): Pod[] {
  const out: Pod[] = [];
  for (const p of c.pods.values()) if (isPolicyPod(p) && p.ips.some((x) => x.equals(ip))) out.push(p);
  return out.sort((a, b) => keyOf(a) < keyOf(b) ? -1 : 1);
}

function peerOk(c: Cluster, peers: Peer[], policyNs: string, ip: IPAddr, others: Pod[]): boolean {
  if (peers.length === 0) return true;
  return peers.some((peer) =>
    peer.ipBlock
      ? peer.ipBlock.cidr.contains(ip) && !peer.ipBlock.except.some((e) => e.contains(ip))
      : others.some((o) => peerSelectsPod(peer, policyNs, o, c.namespaces))
  );
}

/**
 * True when `pp` admits `proto`/`port` on one of `targets` (the pods that own the destination address: a
 * named port resolves on them, so it never matches an address no pod holds).
 */
export function portAdmits(pp: PolicyPort, proto: PacketProto, port: number, targets: Pod[]): boolean {
  if (pp.protocol !== proto) return false;
  if (typeof pp.port !== "string") {
    const r = resolvePort(pp, undefined);
    return r === "any" || (r !== null && port >= r[0] && port <= r[1]);
  }
  return targets.some((t) => {
    const r = resolvePort(pp, t);
    return r !== null && r !== "any" && port >= r[0] && port <= r[1];
  });
}

function decide(
  c: Cluster,
  dir: "ingress" | "egress",
  self: Pod | undefined,
  other: IPAddr,
  proto: PacketProto,
  port: number,
  dstPods: Pod[],
): Decision {
  if (!self) return { isolated: false, allowed: true, policies: [] };
  const pols = [...c.policies.entries()]
    .filter(([, p]) => p.types[dir] && selects(p, self))
    .sort(([a], [b]) => a < b ? -1 : 1);
  if (pols.length === 0) return { isolated: false, allowed: true, policies: [] };
  const policies = pols.map(([k]) => k);
  const others = podsByIp(c, other);
  for (const [key, pol] of pols) {
    const rules = pol[dir];
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i];
      if (r.ports.length && !r.ports.some((pp) => portAdmits(pp, proto, port, dstPods))) continue;
      if (!peerOk(c, r.peers, pol.namespace, other, others)) continue;
      return { isolated: true, allowed: true, by: { policy: key, rule: i }, policies };
    }
  }
  return { isolated: true, allowed: false, policies };
}

/** The verdict for a packet from `src` to `dst` (addresses), protocol and destination port. */
export function evaluate(c: Cluster, src: IPAddr, dst: IPAddr, proto: PacketProto, port: number): Verdict {
  const srcPod = podsByIp(c, src)[0];
  const dstPods = podsByIp(c, dst);
  const egress = decide(c, "egress", srcPod, dst, proto, port, dstPods);
  const ingress = decide(c, "ingress", dstPods[0], src, proto, port, dstPods.slice(0, 1));
  return { allowed: egress.allowed && ingress.allowed, egress, ingress };
}
