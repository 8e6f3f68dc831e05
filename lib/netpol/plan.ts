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
import { keyOf, matches, type Peer, type Pod, type Policy, type Proto, type Rule } from "./model.ts";
import { merge, type Range, rangeText, subtract } from "./ranges.ts";

/** One allow rule of a pod chain. */
export interface PlanRule {
  family: IPFamily;
  /** The set of the other end's addresses (absent: any address). */
  peer?: string;
  /** The set of `destination address . port` (egress named ports). */
  named?: string;
  proto?: Proto;
  /** Destination port ranges, inclusive, sorted and disjoint (absent: any port of `proto`). */
  ports?: readonly (readonly [number, number])[];
  /** The named set holding `ports` when there are several. */
  portSet?: string;
  /** The policy key and rule index this rule comes from. */
  policy: string;
  rule: number;
}

/** A pod's chain for one direction. */
export interface PodChain {
  dir: "ingress" | "egress";
  pod: string;
  rules: PlanRule[];
  /** The keys of the policies that isolate the pod in this direction. */
  policies: string[];
}

/** A set: addresses (interval), `address . port` pairs or port ranges; elements as nft text, sorted. */
export interface PlanSet {
  family: IPFamily;
  kind: "addr" | "addrport" | "port";
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
  /** Chains of the last compile, reused where nothing they depend on changed. */
  cache?: ChainCache;
}

/** A rule's peers as text (rules are not changed once parsed). */
const peersText = new WeakMap<Rule, string>();

/** A set the builder made for a chain, to make again when the chain is reused. */
type SetRequest = (b: Builder) => void;

/**
 * Pod chains kept between compiles: a chain depends only on its pod and the policies that select it (the
 * sets it names hold the peers, and are made afresh each time), so while those are the same objects it is
 * reused, with the sets it names.
 */
export class ChainCache {
  readonly entries = new Map<
    string,
    { pod: Pod; pols: Policy[]; chain: PodChain; sets: Map<string, SetRequest> }
  >();
}

class Builder {
  /** While a chain is built: the sets it asked for. */
  record: Map<string, SetRequest> | null = null;
  readonly plan: Plan = {
    sets: new Map(),
    chains: new Map(),
    maps: { in4: new Map(), in6: new Map(), eg4: new Map(), eg6: new Map() },
    pending: { ingress: false, egress: false },
  };
  readonly #c: Cluster;
  readonly #policyPods: Pod[];
  /** The policy pods with addresses, by namespace. */
  readonly #byNs = new Map<string, Pod[]>();

  constructor(c: Cluster) {
    this.#c = c;
    this.#policyPods = [...c.pods.values()].filter((p) => isPolicyPod(p) && p.ips.length > 0);
    for (const p of this.#policyPods) {
      const l = this.#byNs.get(p.namespace);
      if (l) l.push(p);
      else this.#byNs.set(p.namespace, [p]);
    }
  }

  /** The pods a selector peer can match: its policy's namespace, or those of the matching namespaces. */
  #candidates(peer: Peer, policyNs: string): Pod[] {
    if (!peer.namespaceSelector) return this.#byNs.get(policyNs) ?? [];
    const out: Pod[] = [];
    for (const [ns, pods] of this.#byNs) {
      const n = this.#c.namespaces.get(ns);
      if (n && matches(peer.namespaceSelector, n.labels)) out.push(...pods);
    }
    return out;
  }

  /** Set name → the peers it holds (rules with the same peers share one set). */
  readonly #peerKeys = new Map<string, string>();
  /** The peers' identity → the set's name. */
  readonly #peerNames = new Map<string, string>();

  /**
   * The set of a rule's peers for one family (made on first use), shared by every rule with the same peers:
   * named by a hash of the peers (and of the policy's namespace when a peer is relative to it).
   */
  peerSet(pol: Policy, r: Rule, f: IPFamily): string {
    const relative = r.peers.some((p) => !p.ipBlock && !p.namespaceSelector);
    let peers = peersText.get(r);
    if (peers === undefined) peersText.set(r, peers = JSON.stringify(r.peers));
    const key = `${f} ${relative ? pol.namespace : ""} ${peers}`;
    const known = this.#peerNames.get(key);
    if (known) {
      this.record?.set(known, (b) => b.peerSet(pol, r, f));
      return known;
    }
    let name = `p-${shortHash(key)}-${fam(f)}`;
    for (let n = 2; this.#peerKeys.has(name); n++) name = `p-${shortHash(key)}-${n}-${fam(f)}`; // a collision
    this.#peerKeys.set(name, key);
    this.#peerNames.set(key, name);
    this.record?.set(name, (b) => b.peerSet(pol, r, f));
    const ranges: Range[] = [];
    for (const peer of r.peers) {
      if (peer.ipBlock) {
        if (peer.ipBlock.cidr.family === f) ranges.push(...subtract(peer.ipBlock.cidr, peer.ipBlock.except));
        continue;
      }
      for (const p of this.#candidates(peer, pol.namespace)) {
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
    this.record?.set(name, (b) => b.namedSet(portName, proto, f));
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

  /**
   * The named set of several port ranges, shared by every rule with the same ports (anonymous sets, one
   * kernel object per rule, make nft's transactions slow down with the square of their number).
   */
  portSet(ports: readonly (readonly [number, number])[]): string {
    const elements = ports.map(([a, b]) => a === b ? `${a}` : `${a}-${b}`);
    const text = elements.join(",");
    let name = this.#portNames.get(text);
    if (!name) {
      name = `q-${shortHash(text)}`;
      const had = this.plan.sets.get(name);
      if (had) throw new Error(`port set ${name}: a hash collision`);
      this.plan.sets.set(name, { family: 4, kind: "port", elements });
      this.#portNames.set(text, name);
    }
    this.record?.set(name, (b) => b.portSet(ports));
    return name;
  }

  /** Port ranges as text → their set's name. */
  readonly #portNames = new Map<string, string>();

  /** The allow rules of one policy rule for a selected pod. */
  rules(polKey: string, pol: Policy, dir: "ingress" | "egress", idx: number, r: Rule, self: Pod): PlanRule[] {
    const out: PlanRule[] = [];
    for (const f of [4, 6] as const) {
      if (!self.ips.some((ip) => ip.family === f)) continue;
      const peer = r.peers.length ? this.peerSet(pol, r, f) : undefined;
      const base = { family: f, policy: polKey, rule: idx, ...(peer ? { peer } : {}) };
      if (r.ports.length === 0) {
        out.push(base);
        continue;
      }
      // Per protocol one rule: every port of it in one anonymous set (or none when one entry allows all).
      const byProto = new Map<Proto, [number, number][] | "any">();
      for (const pp of r.ports) {
        if (typeof pp.port === "string" && dir === "egress") {
          out.push({ ...base, proto: pp.protocol, named: this.namedSet(pp.port, pp.protocol, f) });
          continue;
        }
        const res = resolvePort(pp, self);
        if (res === null) continue; // a named port this pod does not define: nothing to allow
        const had = byProto.get(pp.protocol);
        if (res === "any" || had === "any") byProto.set(pp.protocol, "any");
        else byProto.set(pp.protocol, [...(had ?? []), res]);
      }
      for (const [proto, ports] of byProto) {
        if (ports === "any") {
          out.push({ ...base, proto });
          continue;
        }
        const merged = mergePorts(ports);
        out.push({
          ...base,
          proto,
          ports: merged,
          ...(merged.length > 1 ? { portSet: this.portSet(merged) } : {}),
        });
      }
    }
    return out;
  }
}

/** Sorts port ranges and merges the overlapping and adjacent ones. */
export function mergePorts(rs: readonly (readonly [number, number])[]): [number, number][] {
  const out: [number, number][] = [];
  for (const [a, b] of [...rs].sort((x, y) => x[0] - y[0])) {
    const last = out[out.length - 1];
    if (last && a <= last[1] + 1) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

/** Compiles the plan of `input.node`. */
export function compile(input: PlanInput): Plan {
  const { cluster: c, node } = input;
  const b = new Builder(c);
  const plan = b.plan;
  const known = { 4: [] as Range[], 6: [] as Range[] };
  const polsByNs = new Map<string, [string, Policy][]>();
  for (const e of [...c.policies.entries()].sort(([a], [z]) => a < z ? -1 : 1)) {
    const l = polsByNs.get(e[1].namespace);
    if (l) l.push(e);
    else polsByNs.set(e[1].namespace, [e]);
  }
  const used = new Set<string>();
  const local = [...c.pods.values()].filter((p) => p.node === node && isPolicyPod(p))
    .sort((a, z) => keyOf(a) < keyOf(z) ? -1 : 1);
  for (const pod of local) {
    const podKey = keyOf(pod);
    for (const dir of ["ingress", "egress"] as const) {
      const selecting = (polsByNs.get(pod.namespace) ?? []).filter(([, p]) =>
        p.types[dir] && selects(p, pod)
      );
      if (selecting.length === 0) continue;
      if (pod.ips.length === 0) {
        plan.pending[dir] = true;
        continue;
      }
      let chain = podChainName(dir, podKey);
      for (let n = 2; plan.chains.has(chain); n++) chain = `${podChainName(dir, podKey)}-${n}`; // a hash collision
      const pols = selecting.map(([, p]) => p);
      const ck = `${dir} ${podKey} ${chain}`;
      const hit = input.cache?.entries.get(ck);
      if (
        hit && hit.pod === pod && hit.pols.length === pols.length && hit.pols.every((p, i) => p === pols[i])
      ) {
        for (const [name, make] of hit.sets) if (!plan.sets.has(name)) make(b);
        plan.chains.set(chain, hit.chain);
        used.add(ck);
      } else {
        const rules: PlanRule[] = [];
        b.record = new Map();
        for (const [k, pol] of selecting) {
          pol[dir].forEach((r, i) => rules.push(...b.rules(k, pol, dir, i, r, pod)));
        }
        const made: PodChain = { dir, pod: podKey, rules, policies: selecting.map(([k]) => k) };
        plan.chains.set(chain, made);
        input.cache?.entries.set(ck, { pod, pols, chain: made, sets: b.record });
        used.add(ck);
        b.record = null;
      }
      for (const ip of pod.ips) {
        const m = plan.maps[`${dir === "ingress" ? "in" : "eg"}${fam(ip.family)}` as MapName];
        if (!m.has(ip.toString())) m.set(ip.toString(), chain);
      }
    }
    for (const ip of pod.ips) known[ip.family].push([ip.value, ip.value]);
  }
  if (input.cache) {
    for (const k of input.cache.entries.keys()) if (!used.has(k)) input.cache.entries.delete(k);
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
