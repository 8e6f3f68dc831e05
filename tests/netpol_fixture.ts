/**
 * NetworkPolicy test fixtures: API objects as the API server sends them (pods, namespaces, policies), the
 * cluster model built from them, and an interpreter of compiled plans (what the nft table does with a
 * packet, read from the plan's structure), so tests can compare the dataplane's logic with the API's.
 * @module
 */
import { IPAddr, type IPFamily } from "../lib/base/cidr.ts";
import type { Cluster, PacketProto } from "../lib/netpol/evaluate.ts";
import {
  keyOf,
  type Namespace,
  parseNamespace,
  parsePod,
  parsePolicy,
  type Pod,
  type Policy,
} from "../lib/netpol/model.ts";
import type { MapName, Plan, PlanSet } from "../lib/netpol/plan.ts";
import { NAMESPACES, podIp4, podIp6, podNode, podPorts, PODS, type VerdictCase } from "./netpol_cases.ts";

/** A JSON object. */
export type Json = Record<string, unknown>;

/** A Pod object. */
export function podJson(
  ns: string,
  name: string,
  o: {
    labels?: Record<string, string>;
    ips?: string[];
    node?: string;
    ports?: Json[];
    hostNetwork?: boolean;
    phase?: string;
  } = {},
): Json {
  return {
    metadata: { namespace: ns, name, labels: o.labels ?? {}, resourceVersion: "1" },
    spec: {
      nodeName: o.node ?? "n1",
      hostNetwork: o.hostNetwork ?? false,
      containers: [{ name: "c", ports: o.ports ?? [] }],
    },
    status: { phase: o.phase ?? "Running", podIPs: (o.ips ?? []).map((ip) => ({ ip })), podIP: o.ips?.[0] },
  };
}

/** A Namespace object. */
export function nsJson(name: string, labels: Record<string, string> = {}): Json {
  return {
    metadata: { name, labels: { "kubernetes.io/metadata.name": name, ...labels }, resourceVersion: "1" },
  };
}

/** A NetworkPolicy object. */
export function policyJson(ns: string, name: string, spec: Json): Json {
  return { metadata: { namespace: ns, name, resourceVersion: "1" }, spec };
}

/** The cluster model of raw objects. */
export function clusterOf(pods: Json[], namespaces: Json[], policies: Json[]): Cluster & {
  pods: Map<string, Pod>;
  namespaces: Map<string, Namespace>;
  policies: Map<string, Policy>;
} {
  return {
    pods: new Map(pods.map((p) => parsePod(p)).map((p) => [keyOf(p), p])),
    namespaces: new Map(namespaces.map((n) => parseNamespace(n)).map((n) => [n.name, n])),
    policies: new Map(policies.map((p) => parsePolicy(p)).map((p) => [keyOf(p), p])),
  };
}

function inSet(s: PlanSet | undefined, key: string): boolean {
  if (!s) throw new Error("rule names a set the plan lacks");
  if (s.kind === "addrport") return s.elements.includes(key);
  const ip = IPAddr.parse(key);
  return s.elements.some((e) => {
    const [a, b] = e.split("-");
    const lo = IPAddr.parse(a), hi = b ? IPAddr.parse(b) : lo;
    return ip.family === lo.family && ip.value >= lo.value && ip.value <= hi.value;
  });
}

/** What one node's table does with a packet in one direction: "pass" (on), "drop", or "accept". */
function side(
  plan: Plan,
  dir: "ingress" | "egress",
  self: IPAddr,
  other: IPAddr,
  dst: IPAddr,
  proto: PacketProto,
  port: number,
): boolean {
  const f = self.family as IPFamily;
  const chain = plan.maps[`${dir === "ingress" ? "in" : "eg"}${f}` as MapName].get(self.toString());
  if (!chain) {
    if (!plan.pending[dir]) return true;
    if (inSet(plan.sets.get(`known${f}`), self.toString())) return true;
    return !inSet(plan.sets.get(`local${f}`), self.toString());
  }
  const c = plan.chains.get(chain);
  if (!c) throw new Error(`map names chain ${chain} the plan lacks`);
  return c.rules.some((r) => {
    if (r.family !== f) return false;
    if (r.proto && r.proto !== proto) return false;
    if (r.ports && (port < r.ports[0] || port > r.ports[1])) return false;
    if (r.peer && !inSet(plan.sets.get(r.peer), other.toString())) return false;
    if (r.named && !inSet(plan.sets.get(r.named), `${dst} . ${port}`)) return false;
    return true;
  });
}

/**
 * Whether the tables of the source's and the destination's nodes pass a new connection: the source's node
 * checks egress, the destination's ingress (`nodeOf` maps an address to its node's plan, undefined off the
 * cluster).
 */
export function simulate(
  nodeOf: (ip: IPAddr) => Plan | undefined,
  src: IPAddr,
  dst: IPAddr,
  proto: PacketProto,
  port: number,
): boolean {
  const a = nodeOf(src), b = nodeOf(dst);
  if (a && !side(a, "egress", src, dst, dst, proto, port)) return false;
  if (b && !side(b, "ingress", dst, src, dst, proto, port)) return false;
  return true;
}

/** The raw objects of a verdict case's cluster (tests/netpol_cases.ts). */
export function caseObjects(c: VerdictCase): { pods: Json[]; namespaces: Json[]; policies: Json[] } {
  const pods: Json[] = [];
  for (const ns of NAMESPACES) {
    for (const name of PODS) {
      const key = `${ns}/${name}`;
      pods.push(podJson(ns, name, {
        labels: { pod: name, ...c.podLabels?.[key] },
        ips: [podIp4(key), podIp6(key)],
        node: podNode(key),
        ports: podPorts(key),
      }));
    }
  }
  return {
    pods,
    namespaces: NAMESPACES.map((n) => nsJson(n, { team: n })),
    policies: c.policies.map((p) => policyJson(p.ns, p.name, p.spec)),
  };
}

/** The address of a probe's end (a pod key or an address) in `family`. */
export function probeAddr(end: string, family: IPFamily): IPAddr {
  return IPAddr.parse(end.includes("/") ? (family === 4 ? podIp4(end) : podIp6(end)) : end);
}
