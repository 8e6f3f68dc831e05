/**
 * One match against one packet: true, false, or "unknown" when the packet description cannot tell (a
 * source port that varies, a match this evaluator does not model). A rule matches when all its matches do:
 * one false match settles "no" even beside unknown ones.
 * @module
 */
import { IPNet } from "../../base/cidr.ts";
import type { AddrSpec, Match, Packet, Tri } from "./types.ts";

/** The state a walk carries beside the packet: the mark set so far and whether a DNAT happened. */
export interface WalkState {
  mark: number;
  dnat: boolean;
  snat: boolean;
  /** Left conntrack (NOTRACK): state UNTRACKED, no status, no NAT. */
  untracked: boolean;
}

const PORT_PROTOS = new Set([6, 17, 33, 132, 136]);
const MCAST4 = IPNet.parse("224.0.0.0/4");
const MCAST6 = IPNet.parse("ff00::/8");

function inAddr(a: AddrSpec, ip: Packet["src"]): boolean {
  if ("net" in a) return a.net.contains(ip);
  return a.lo.family === ip.family && a.lo.value <= ip.value && ip.value <= a.hi.value;
}

/** An interface name against iptables' `eth+` / nft's `eth*` wildcard or an exact name. */
export function ifaceMatches(pattern: string, name: string): boolean {
  if (pattern.endsWith("+") || (pattern.endsWith("*") && !pattern.endsWith("\\*"))) {
    return name !== "" && name.startsWith(pattern.slice(0, -1));
  }
  return name === pattern.replace(/\\\*$/, "*");
}

function addrType(t: string, ip: Packet["src"], local: boolean): Tri {
  const mcast = (ip.family === 4 ? MCAST4 : MCAST6).contains(ip);
  switch (t) {
    case "LOCAL":
      return local;
    case "MULTICAST":
      return mcast;
    case "UNICAST":
      return !local && !mcast && !(ip.family === 4 && ip.value === 0xffffffffn);
    case "BROADCAST":
      return ip.family === 4 && ip.value === 0xffffffffn;
    case "UNSPEC":
      return ip.value === 0n;
    default:
      return "unknown";
  }
}

/** Any of `xs` true → true; else any unknown → unknown; else false. */
function any(xs: Tri[]): Tri {
  if (xs.includes(true)) return true;
  return xs.includes("unknown") ? "unknown" : false;
}

function not(t: Tri, neg: boolean): Tri {
  return t === "unknown" || !neg ? t : !t;
}

/** One match's answer for `p` in state `s`. */
export function evalMatch(m: Match, p: Packet, s: WalkState): Tri {
  switch (m.kind) {
    case "addr": {
      const ip = m.field === "src" ? p.src : p.dst;
      return not(m.addrs.some((a) => inAddr(a, ip)), m.neg);
    }
    case "iface":
      return not(m.names.some((n) => ifaceMatches(n, m.field === "in" ? p.iif : p.oif)), m.neg);
    case "proto":
      return not(m.protos.includes(p.proto), m.neg);
    case "nfproto":
      return not(p.family === m.family, m.neg);
    case "port": {
      if (!PORT_PROTOS.has(p.proto)) return "unknown";
      const hit = (port: number | null): Tri =>
        port === null
          ? (m.ranges.some(([lo, hi]) => lo === 0 && hi === 65535) ? true : "unknown")
          : m.ranges.some(([lo, hi]) => lo <= port && port <= hi);
      const r = m.field === "either"
        ? any([hit(p.sport), hit(p.dport)])
        : hit(m.field === "sport" ? p.sport : p.dport);
      return not(r, m.neg);
    }
    case "ctstate":
      return not(m.states.includes(s.untracked ? "untracked" : "new"), m.neg);
    case "ctstatus":
      return not(
        any(
          m.flags.map((f): Tri =>
            s.untracked
              ? false
              : f === "dnat"
              ? s.dnat
              : f === "snat"
              ? s.snat
              : ["confirmed", "seen_reply", "assured", "expected"].includes(f)
              ? false
              : "unknown"
          ),
        ),
        m.neg,
      );
    case "addrtype": {
      const ip = m.field === "src" ? p.src : p.dst;
      const local = m.field === "src" ? p.srcLocal : p.dstLocal;
      return not(any(m.types.map((t) => addrType(t, ip, local))), m.neg);
    }
    case "mark":
      return not(((s.mark & m.mask) >>> 0) === m.value, m.neg);
    case "icmptype":
      if (p.proto !== 1 && p.proto !== 58) return false;
      return p.icmpType === undefined ? "unknown" : not(m.types.includes(p.icmpType), m.neg);
    case "tcpflags":
      if (p.proto !== 6) return false;
      return p.tcpFlags === undefined ? "unknown" : not((p.tcpFlags & m.mask) === m.comp, m.neg);
    case "pkttype":
      return not(
        any(
          m.types.map((t): Tri =>
            t === "unicast" || t === "host"
              ? true
              : t === "broadcast" || t === "multicast"
              ? false
              : "unknown"
          ),
        ),
        m.neg,
      );
    case "fragment":
      return not(false, m.neg);
    case "unknown":
      return "unknown";
  }
}

/** All of a rule's matches: false beats unknown beats true. Returns the first unknown match too. */
export function evalMatches(ms: Match[], p: Packet, s: WalkState): { hit: Tri; unknown: string | null } {
  let unknown: string | null = null;
  for (const m of ms) {
    const r = evalMatch(m, p, s);
    if (r === false) return { hit: false, unknown: null };
    if (r === "unknown" && unknown === null) unknown = describe(m);
  }
  return { hit: unknown === null ? true : "unknown", unknown };
}

/** A match as a report names it when it cannot be decided. */
export function describe(m: Match): string {
  switch (m.kind) {
    case "unknown":
      return m.text;
    case "port":
      return `${m.neg ? "! " : ""}${m.field} ${
        m.ranges.map(([a, b]) => a === b ? a : `${a}:${b}`).join(",")
      }`;
    default:
      return `${m.kind} ${JSON.stringify(m).slice(0, 120)}`;
  }
}
