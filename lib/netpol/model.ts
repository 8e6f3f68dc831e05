/**
 * The NetworkPolicy model: networking.k8s.io/v1 NetworkPolicy, Pod and Namespace objects projected onto what
 * enforcement needs, from untrusted API JSON (validated and bounded here, never printed raw).
 *
 * Semantics follow the API's types.go comments: an empty podSelector selects every pod of the policy's
 * namespace; `policyTypes` absent means Ingress, plus Egress when the policy has egress rules; an ingress
 * (egress) rule with no `from` (`to`) matches every peer, with no `ports` every port and protocol; a peer
 * with only podSelector means pods of the policy's namespace, with only namespaceSelector every pod of the
 * matching namespaces, with both the matching pods of the matching namespaces; a port's protocol defaults
 * to TCP, a port absent means every port of that protocol, `endPort` makes `port`..`endPort` a range.
 *
 * A policy that fails validation is not dropped (that would open the pods it was written to protect): it
 * becomes {@link Policy.invalid}, which selects every pod of its namespace for ingress and egress and allows
 * nothing (fail closed), and the reason is reported once.
 * @module
 */
import { IPAddr, IPNet } from "../base/cidr.ts";
import { FlanctlError } from "../base/errors.ts";
import { isObj } from "../base/json.ts";

/** The protocols a NetworkPolicyPort names. */
export type Proto = "TCP" | "UDP" | "SCTP";
/** The four label selector operators. */
export type SelectorOp = "In" | "NotIn" | "Exists" | "DoesNotExist";

/** One matchExpressions requirement. */
export interface Requirement {
  key: string;
  op: SelectorOp;
  values: string[];
}

/** A label selector: every matchLabels pair and every requirement hold (empty: everything matches). */
export interface Selector {
  matchLabels: Record<string, string>;
  matchExpressions: Requirement[];
}

/** An ipBlock: `cidr` without its `except` prefixes. */
export interface IpBlock {
  cidr: IPNet;
  except: IPNet[];
}

/** A NetworkPolicyPeer (exactly one of the shapes the API allows). */
export interface Peer {
  podSelector?: Selector;
  namespaceSelector?: Selector;
  ipBlock?: IpBlock;
}

/** A NetworkPolicyPort: a number, a name (resolved per pod) or a range; no port: every port of `protocol`. */
export interface PolicyPort {
  protocol: Proto;
  port?: number | string;
  endPort?: number;
}

/** One ingress or egress rule: no ports = every port and protocol; no peers = every peer. */
export interface Rule {
  ports: PolicyPort[];
  peers: Peer[];
}

/** A NetworkPolicy as enforcement sees it. */
export interface Policy {
  namespace: string;
  name: string;
  podSelector: Selector;
  ingress: Rule[];
  egress: Rule[];
  /** The policy types after defaulting. */
  types: { ingress: boolean; egress: boolean };
  /** Why the object was refused: then it selects its whole namespace and allows nothing. */
  invalid?: string;
}

/** A container port, for named ports. */
export interface ContainerPort {
  name: string;
  port: number;
  protocol: Proto;
}

/** A Pod as enforcement sees it. */
export interface Pod {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  /** status.podIPs (or podIP); empty until the kubelet reports them. */
  ips: IPAddr[];
  /** spec.nodeName ("" while unscheduled). */
  node: string;
  /** hostNetwork pods are not pods for policy. */
  hostNetwork: boolean;
  /** Succeeded or Failed: its IPs may already belong to another pod. */
  terminal: boolean;
  /** The named container ports. */
  ports: ContainerPort[];
}

/** A Namespace: its name and labels. */
export interface Namespace {
  name: string;
  labels: Record<string, string>;
}

/** A refused object (a Pod or Namespace that cannot be used at all). */
export class NetpolModelError extends FlanctlError {}

/** Caps on one object: beyond them the object is refused (policies: fail closed). */
export const LIMITS = {
  labels: 256,
  rules: 256,
  peers: 256,
  ports: 256,
  except: 256,
  values: 256,
  expressions: 64,
  containerPorts: 1024,
  ips: 4,
} as const;

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_PREFIX = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const LABEL_VALUE = /^(|[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/;
const PORT_NAME = /^[a-z0-9]([-a-z0-9]{0,13})$/;

type Obj = Record<string, unknown>;

class Refused extends Error {}

function fail(what: string): never {
  throw new Refused(what);
}

/** True for a valid label key (an optional DNS prefix and `/`, then a name of at most 63 characters). */
export function validLabelKey(k: string): boolean {
  const i = k.indexOf("/");
  if (i < 0) return LABEL_NAME.test(k);
  return LABEL_PREFIX.test(k.slice(0, i)) && LABEL_NAME.test(k.slice(i + 1));
}

function name(v: unknown, what: string): string {
  if (typeof v !== "string" || !NAME.test(v)) fail(`${what} is not a valid name`);
  return v;
}

function labels(v: unknown, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (v === undefined || v === null) return out;
  if (!isObj(v)) fail(`${what} is not an object`);
  const keys = Object.keys(v);
  if (keys.length > LIMITS.labels) fail(`${what} has more than ${LIMITS.labels} entries`);
  for (const k of keys) {
    const x = v[k];
    if (!validLabelKey(k) || typeof x !== "string" || !LABEL_VALUE.test(x)) {
      fail(`${what} has an invalid label`);
    }
    out[k] = x;
  }
  return out;
}

function arr(v: unknown, max: number, what: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) fail(`${what} is not a list`);
  if (v.length > max) fail(`${what} has more than ${max} entries`);
  return v;
}

/** Parses a LabelSelector (absent or null: the empty selector, which matches everything). */
export function parseSelector(v: unknown, what = "selector"): Selector {
  if (v === undefined || v === null) return { matchLabels: {}, matchExpressions: [] };
  if (!isObj(v)) fail(`${what} is not an object`);
  const matchLabels = labels(v.matchLabels, `${what}.matchLabels`);
  const matchExpressions = arr(v.matchExpressions, LIMITS.expressions, `${what}.matchExpressions`).map(
    (e) => {
      if (!isObj(e)) fail(`${what}.matchExpressions has a non-object`);
      const key = e.key, op = e.operator;
      if (typeof key !== "string" || !validLabelKey(key)) fail(`${what}.matchExpressions has an invalid key`);
      if (op !== "In" && op !== "NotIn" && op !== "Exists" && op !== "DoesNotExist") {
        fail(`${what}.matchExpressions has an unknown operator`);
      }
      const values = arr(e.values, LIMITS.values, `${what}.matchExpressions values`).map((x) => {
        if (typeof x !== "string" || !LABEL_VALUE.test(x)) {
          fail(`${what}.matchExpressions has an invalid value`);
        }
        return x;
      });
      const needValues = op === "In" || op === "NotIn";
      if (needValues !== values.length > 0) {
        fail(`${what}.matchExpressions: ${op} ${needValues ? "needs" : "takes no"} values`);
      }
      return { key, op, values } as Requirement;
    },
  );
  return { matchLabels, matchExpressions };
}

function proto(v: unknown): Proto {
  if (v === undefined || v === null) return "TCP";
  if (v === "TCP" || v === "UDP" || v === "SCTP") return v;
  return fail("a port has an unknown protocol");
}

function portNumber(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > 65535) fail(`${what} is out of range`);
  return v;
}

function parsePort(v: unknown): PolicyPort {
  if (!isObj(v)) fail("a port is not an object");
  const out: PolicyPort = { protocol: proto(v.protocol) };
  if (v.port !== undefined && v.port !== null) {
    if (typeof v.port === "string") {
      if (/^\d+$/.test(v.port)) out.port = portNumber(Number(v.port), "port");
      else if (PORT_NAME.test(v.port) && /[a-z]/.test(v.port)) out.port = v.port;
      else fail("a port name is invalid");
    } else out.port = portNumber(v.port, "port");
  }
  if (v.endPort !== undefined && v.endPort !== null) {
    if (typeof out.port !== "number") fail("endPort needs a numeric port");
    out.endPort = portNumber(v.endPort, "endPort");
    if (out.endPort < out.port) fail("endPort is below port");
  }
  return out;
}

function parseCidr(v: unknown, what: string): IPNet {
  const n = typeof v === "string" && v.length <= 64 ? IPNet.tryParse(v) : null;
  if (!n) fail(`${what} is not a CIDR`);
  return n;
}

function parsePeer(v: unknown): Peer {
  if (!isObj(v)) fail("a peer is not an object");
  const out: Peer = {};
  if (v.ipBlock !== undefined && v.ipBlock !== null) {
    if (v.podSelector != null || v.namespaceSelector != null) fail("ipBlock is combined with a selector");
    const b = v.ipBlock;
    if (!isObj(b)) fail("ipBlock is not an object");
    const cidr = parseCidr(b.cidr, "ipBlock.cidr");
    const except = arr(b.except, LIMITS.except, "ipBlock.except").map((e) => {
      const x = parseCidr(e, "ipBlock.except");
      if (!cidr.contains(x) || x.equals(cidr)) fail("ipBlock.except is not strictly inside the cidr");
      return x;
    });
    out.ipBlock = { cidr, except };
    return out;
  }
  if (v.podSelector != null) out.podSelector = parseSelector(v.podSelector, "podSelector");
  if (v.namespaceSelector != null) {
    out.namespaceSelector = parseSelector(v.namespaceSelector, "namespaceSelector");
  }
  if (!out.podSelector && !out.namespaceSelector) fail("a peer has no selector and no ipBlock");
  return out;
}

function parseRules(v: unknown, peersKey: "from" | "to", what: string): Rule[] {
  return arr(v, LIMITS.rules, what).map((r) => {
    if (!isObj(r)) fail(`${what} has a non-object rule`);
    return {
      ports: arr(r.ports, LIMITS.ports, `${what} ports`).map(parsePort),
      peers: arr(r[peersKey], LIMITS.peers, `${what} ${peersKey}`).map(parsePeer),
    };
  });
}

/**
 * A NetworkPolicy from API JSON. Throws {@link NetpolModelError} only when it has no usable namespace and
 * name; any other fault gives the fail-closed {@link Policy.invalid} form.
 */
export function parsePolicy(raw: unknown): Policy {
  const o = isObj(raw) ? raw : {};
  const md = isObj(o.metadata) ? o.metadata : {};
  let namespace: string, pname: string;
  try {
    namespace = name(md.namespace, "metadata.namespace");
    pname = name(md.name, "metadata.name");
  } catch (e) {
    throw new NetpolModelError(`NetworkPolicy: ${e instanceof Error ? e.message : "refused"}`);
  }
  try {
    const spec = isObj(o.spec) ? o.spec : fail("spec is not an object");
    const podSelector = parseSelector(spec.podSelector, "podSelector");
    const ingress = parseRules(spec.ingress, "from", "ingress");
    const egress = parseRules(spec.egress, "to", "egress");
    let types = { ingress: true, egress: egress.length > 0 };
    if (spec.policyTypes !== undefined && spec.policyTypes !== null) {
      const t = arr(spec.policyTypes, 2, "policyTypes");
      if (t.some((x) => x !== "Ingress" && x !== "Egress")) fail("policyTypes has an unknown type");
      types = { ingress: t.includes("Ingress"), egress: t.includes("Egress") };
    }
    return { namespace, name: pname, podSelector, ingress, egress, types };
  } catch (e) {
    if (!(e instanceof Refused)) throw e;
    return {
      namespace,
      name: pname,
      podSelector: { matchLabels: {}, matchExpressions: [] },
      ingress: [],
      egress: [],
      types: { ingress: true, egress: true },
      invalid: e.message,
    };
  }
}

/** A Namespace from API JSON; throws {@link NetpolModelError} when it cannot be used. */
export function parseNamespace(raw: unknown): Namespace {
  try {
    const md = isObj(raw) && isObj(raw.metadata) ? raw.metadata : fail("no metadata");
    return { name: name(md.name, "metadata.name"), labels: labels(md.labels, "metadata.labels") };
  } catch (e) {
    throw new NetpolModelError(`Namespace: ${e instanceof Error ? e.message : "refused"}`);
  }
}

function podIps(status: Obj): IPAddr[] {
  const list = Array.isArray(status.podIPs) ? status.podIPs.slice(0, LIMITS.ips) : [];
  const out: IPAddr[] = [];
  for (const x of list) {
    const ip = isObj(x) && typeof x.ip === "string" && x.ip.length <= 64 ? IPAddr.tryParse(x.ip) : null;
    if (ip && !out.some((o) => o.equals(ip))) out.push(ip);
  }
  if (out.length === 0 && typeof status.podIP === "string" && status.podIP.length <= 64) {
    const ip = IPAddr.tryParse(status.podIP);
    if (ip) out.push(ip);
  }
  return out;
}

function containerPorts(spec: Obj): ContainerPort[] {
  const out: ContainerPort[] = [];
  const containers = [
    ...(Array.isArray(spec.containers) ? spec.containers : []),
    ...(Array.isArray(spec.initContainers) ? spec.initContainers : []),
  ];
  for (const c of containers) {
    if (!isObj(c) || !Array.isArray(c.ports)) continue;
    for (const p of c.ports) {
      if (!isObj(p) || typeof p.name !== "string" || !PORT_NAME.test(p.name)) continue;
      const n = p.containerPort;
      if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 65535) continue;
      const pr = p.protocol ?? "TCP";
      if (pr !== "TCP" && pr !== "UDP" && pr !== "SCTP") continue;
      if (out.length >= LIMITS.containerPorts) {
        throw new NetpolModelError(`Pod: more than ${LIMITS.containerPorts} named ports`);
      }
      out.push({ name: p.name, port: n, protocol: pr });
    }
  }
  return out;
}

/** A Pod from API JSON; throws {@link NetpolModelError} when it cannot be used. */
export function parsePod(raw: unknown): Pod {
  let md: Obj;
  let namespace: string, pname: string, podLabels: Record<string, string>;
  try {
    md = isObj(raw) && isObj(raw.metadata) ? raw.metadata : fail("no metadata");
    namespace = name(md.namespace, "metadata.namespace");
    pname = name(md.name, "metadata.name");
    podLabels = labels(md.labels, "metadata.labels");
  } catch (e) {
    throw new NetpolModelError(`Pod: ${e instanceof Error ? e.message : "refused"}`);
  }
  const o = raw as Obj;
  const spec = isObj(o.spec) ? o.spec : {};
  const status = isObj(o.status) ? o.status : {};
  const node = typeof spec.nodeName === "string" && NAME.test(spec.nodeName) ? spec.nodeName : "";
  return {
    namespace,
    name: pname,
    labels: podLabels,
    ips: podIps(status),
    node,
    hostNetwork: spec.hostNetwork === true,
    terminal: status.phase === "Succeeded" || status.phase === "Failed",
    ports: containerPorts(spec),
  };
}

/** True when `sel` matches `l`. */
export function matches(sel: Selector, l: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(sel.matchLabels)) if (l[k] !== v) return false;
  for (const r of sel.matchExpressions) {
    const has = Object.hasOwn(l, r.key);
    switch (r.op) {
      case "In":
        if (!has || !r.values.includes(l[r.key])) return false;
        break;
      case "NotIn":
        if (has && r.values.includes(l[r.key])) return false;
        break;
      case "Exists":
        if (!has) return false;
        break;
      case "DoesNotExist":
        if (has) return false;
        break;
    }
  }
  return true;
}

/** `namespace/name`: the key of a pod or policy. */
export function keyOf(o: { namespace: string; name: string }): string {
  return `${o.namespace}/${o.name}`;
}
