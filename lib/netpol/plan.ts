/**
 * The compiler: the cluster's policies, pods and namespaces → one node's plan, the structured content of
 * our nft table (render.ts writes it). Per local pod that a policy isolates, a chain per direction whose
 * rules are the union of every selecting policy's rules (then drop); per rule a set of the peers'
 * addresses (pod IPs and ipBlocks without their excepts); egress named ports through a set of
 * `address . port` of every pod that defines the name; the maps from a local pod's address to its chains.
 * @module
 */
import type { IPFamily, IPNet } from "../base/cidr.ts";
import { type Cluster, isPolicyPod, peerSelectsPod, resolvePort, selects } from "./evaluate.ts";
import { keyOf, type Pod, type Policy, type Proto, type Rule } from "./model.ts";
import { merge, type Range, rangeText, subtract } from "./ranges.ts";

/** One allow rule of a pod chain. */
export interface PlanRule {
  family: IPFamily;
  /** The set of the other end's addresses (absent: any address). */
  peer?: string;
  /** The set of `destination address . port` (egress named ports). */
  named?: string;
  proto?: Proto;
  /** Destination ports, inclusive (absent: any port of `proto`). */
  ports?: readonly [number, number];
  /** The policy key and rule index this rule comes from. */
  policy: string;
  rule: number;
}

/** A pod's chain for one direction. */
export interface PodChain {
  dir: "ingress" | "egress";
  pod: string;
  rules: PlanRule[];
}

/** A set: addresses (interval) or `address . port` pairs, elements as nft text, sorted. */
export interface PlanSet {
  family: IPFamily;
  kind: "addr" | "addrport";
  elements: string[];
}

/** The plan for one node. */
export interface Plan {
  sets: Map<string, PlanSet>;
  chains: Map<string, PodChain>;
  /** Local pod address → its chain, per direction and family (`in4`, `in6`, `eg4`, `eg6`). */
  maps: Record<MapName, Map<string, string>>;
  /** Local pods a policy isolates that have no address yet, per direction. */
  pending: { ingress: boolean; egress: boolean };
}

/** The names of the four verdict maps. */
export type MapName = "in4" | "in6" | "eg4" | "eg6";
/** The sets that always exist: local pod addresses and this node's pod CIDRs. */
export const FIXED_SETS = ["known4", "known6", "local4", "local6"] as const;

/** A short stable hash (hex) of `s`: two FNV-1a 32-bit passes. */
export function shortHash(s: string): string {
  let a = 0x811c9dc5, b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193 + 2);
  }
  return ((a >>> 0).toString(16).padStart(8, "0") + (b >>> 0).toString(16).padStart(8, "0")).slice(0, 14);
}

/** The chain name of a pod's direction. */
export function podChainName(dir: "ingress" | "egress", podKey: string): string {
  return `${dir === "ingress" ? "in" : "eg"}-${shortHash(podKey)}`;
}

function fam(f: IPFamily): "4" | "6" {
  return f === 4 ? "4" : "6";
}

/** What the compiler needs besides the cluster. */
export interface PlanInput {
  cluster: Cluster;
  /** This node's name: its pods are the ones enforced here. */
  node: string;
  /** This node's pod CIDRs (the pending default-deny covers them). */
  podCidrs: readonly IPNet[];
}

class Builder {
  readonly plan: Plan = {
    sets: new Map(),
    chains: new Map(),
    maps: { in4: new Map(), in6: new Map(), eg4: new Map(), eg6: new Map() },
    pending: { ingress: false, egress: false },
  };
  readonly #c: Cluster;
  readonly #policyPods: Pod[];

  constructor(c: Cluster) {
    this.#c = c;
    this.#policyPods = [...c.pods.values()].filter((p) => isPolicyPod(p) && p.ips.length > 0);
  }

  /** The peer set of a rule for one family (made on first use). */
  peerSet(polKey: string, pol: Policy, dir: "ingress" | "egress", idx: number, r: Rule, f: IPFamily): string {
    const name = `p-${shortHash(polKey)}-${dir === "ingress" ? "i" : "e"}${idx}-${fam(f)}`;
    if (this.plan.sets.has(name)) return name;
    const ranges: Range[] = [];
    for (const peer of r.peers) {
      if (peer.ipBlock) {
        if (peer.ipBlock.cidr.family === f) ranges.push(...subtract(peer.ipBlock.cidr, peer.ipBlock.except));
        continue;
      }
      for (const p of this.#policyPods) {
        if (!peerSelectsPod(peer, pol.namespace, p, this.#c.namespaces)) continue;
        for (const ip of p.ips) if (ip.family === f) ranges.push([ip.value, ip.value]);
      }
    }
    this.plan.sets.set(name, {
      family: f,
      kind: "addr",
      elements: merge(ranges).map((x) => rangeText(f, x)),
    });
    return name;
  }

  /** The set of `address . port` of every pod defining the named port (made on first use). */
  namedSet(portName: string, proto: Proto, f: IPFamily): string {
    const name = `n-${proto.toLowerCase()}-${portName}-${fam(f)}`;
    if (this.plan.sets.has(name)) return name;
    const els = new Set<string>();
    for (const p of this.#policyPods) {
      const r = resolvePort({ protocol: proto, port: portName }, p);
      if (!Array.isArray(r)) continue;
      for (const ip of p.ips) if (ip.family === f) els.add(`${ip} . ${r[0]}`);
    }
    this.plan.sets.set(name, { family: f, kind: "addrport", elements: [...els].sort() });
    return name;
  }

  /** The allow rules of one policy rule for a selected pod. */
  rules(polKey: string, pol: Policy, dir: "ingress" | "egress", idx: number, r: Rule, self: Pod): PlanRule[] {
    const out: PlanRule[] = [];
    for (const f of [4, 6] as const) {
      if (!self.ips.some((ip) => ip.family === f)) continue;
      const peer = r.peers.length ? this.peerSet(polKey, pol, dir, idx, r, f) : undefined;
      const base = { family: f, policy: polKey, rule: idx, ...(peer ? { peer } : {}) };
      if (r.ports.length === 0) {
        out.push(base);
        continue;
      }
      for (const pp of r.ports) {
        if (typeof pp.port === "string" && dir === "egress") {
          out.push({ ...base, proto: pp.protocol, named: this.namedSet(pp.port, pp.protocol, f) });
          continue;
        }
        const res = resolvePort(pp, self);
        if (res === null) continue; // a named port this pod does not define: nothing to allow
        out.push(
          res === "any" ? { ...base, proto: pp.protocol } : { ...base, proto: pp.protocol, ports: res },
        );
      }
    }
    return out;
  }
}

/** Compiles the plan of `input.node`. */
export function compile(input: PlanInput): Plan {
  const { cluster: c, node } = input;
  const b = new Builder(c);
  const plan = b.plan;
  const known = { 4: [] as Range[], 6: [] as Range[] };
  const pols = [...c.policies.entries()].sort(([a], [z]) => a < z ? -1 : 1);
  const local = [...c.pods.values()].filter((p) => p.node === node && isPolicyPod(p))
    .sort((a, z) => keyOf(a) < keyOf(z) ? -1 : 1);
  for (const pod of local) {
    const podKey = keyOf(pod);
    for (const dir of ["ingress", "egress"] as const) {
      const selecting = pols.filter(([, p]) => p.types[dir] && selects(p, pod));
      if (selecting.length === 0) continue;
      if (pod.ips.length === 0) {
        plan.pending[dir] = true;
        continue;
      }
      let chain = podChainName(dir, podKey);
      for (let n = 2; plan.chains.has(chain); n++) chain = `${podChainName(dir, podKey)}-${n}`; // a hash collision
      const rules: PlanRule[] = [];
      for (const [k, pol] of selecting) {
        pol[dir].forEach((r, i) => rules.push(...b.rules(k, pol, dir, i, r, pod)));
      }
      plan.chains.set(chain, { dir, pod: podKey, rules });
      for (const ip of pod.ips) {
        const m = plan.maps[`${dir === "ingress" ? "in" : "eg"}${fam(ip.family)}` as MapName];
        if (!m.has(ip.toString())) m.set(ip.toString(), chain);
      }
    }
    for (const ip of pod.ips) known[ip.family].push([ip.value, ip.value]);
  }
  for (const f of [4, 6] as const) {
    plan.sets.set(`known${f}`, {
      family: f,
      kind: "addr",
      elements: merge(known[f]).map((x) => rangeText(f, x)),
    });
    const cidrs = merge(input.podCidrs.filter((n) => n.family === f).map((n) => [n.ip.value, n.last.value]));
    plan.sets.set(`local${f}`, { family: f, kind: "addr", elements: cidrs.map((x) => rangeText(f, x)) });
  }
  return plan;
}
