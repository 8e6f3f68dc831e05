/**
 * The packet-path evaluator's model: a packet, the firewall's chains and rules as the parsers read them
 * (iptables-save text, `nft -j list ruleset`), and what a walk over one netfilter hook returns.
 * @module
 */
import type { IPAddr, IPNet } from "../../base/cidr.ts";

/** The netfilter hooks a walk may cross, in the order a received packet meets them. */
export type Hook = "ingress" | "prerouting" | "input" | "forward" | "output" | "postrouting";

/** Where a rule set came from. */
export type Backend = "iptables-legacy" | "iptables-nft" | "nftables";

/** IP protocol numbers the matches know by name. */
export const PROTO: Record<string, number> = {
  icmp: 1,
  tcp: 6,
  udp: 17,
  gre: 47,
  esp: 50,
  ah: 51,
  "ipv6-icmp": 58,
  icmpv6: 58,
  sctp: 132,
  udplite: 136,
  dccp: 33,
};

/** One packet as the evaluator sees it: the first packet of a connection (conntrack state NEW). */
export interface Packet {
  family: 4 | 6;
  src: IPAddr;
  dst: IPAddr;
  /** Input interface name ("" when the hook has none). */
  iif: string;
  /** Output interface name ("" when the hook has none). */
  oif: string;
  /** IP protocol number (17 udp, 6 tcp, 1 icmp, 58 icmpv6). */
  proto: number;
  /** Source port, or null when it varies (VXLAN's is a hash of the inner flow): a match on it is unknown. */
  sport: number | null;
  dport: number | null;
  /** ICMP type for icmp/icmpv6 packets. */
  icmpType?: number;
  /** TCP flags (SYN = 0x02 for a NEW connection). */
  tcpFlags?: number;
  /** True when the source / destination address is one of this host's (addrtype LOCAL, fib type local). */
  srcLocal: boolean;
  dstLocal: boolean;
}

/** A match's answer: matched, not matched, or cannot tell. */
export type Tri = true | false | "unknown";

/** A port range, inclusive. */
export type PortRange = [number, number];

/** An address set entry: a prefix or an inclusive range. */
export type AddrSpec = { net: IPNet } | { lo: IPAddr; hi: IPAddr };

/** One condition of a rule (all of a rule's matches must hold). */
export type Match =
  | { kind: "addr"; field: "src" | "dst"; addrs: AddrSpec[]; neg: boolean }
  | { kind: "iface"; field: "in" | "out"; names: string[]; neg: boolean }
  | { kind: "proto"; protos: number[]; neg: boolean }
  | { kind: "nfproto"; family: 4 | 6; neg: boolean }
  | { kind: "port"; field: "sport" | "dport" | "either"; ranges: PortRange[]; neg: boolean }
  | { kind: "ctstate"; states: string[]; neg: boolean }
  | { kind: "ctstatus"; flags: string[]; neg: boolean }
  | { kind: "addrtype"; field: "src" | "dst"; types: string[]; neg: boolean }
  | { kind: "mark"; value: number; mask: number; neg: boolean }
  | { kind: "icmptype"; types: number[]; neg: boolean }
  | { kind: "tcpflags"; mask: number; comp: number; neg: boolean }
  | { kind: "pkttype"; types: string[]; neg: boolean }
  | { kind: "fragment"; neg: boolean }
  | { kind: "unknown"; text: string };

/** What a rule does when it matches. */
export type Action =
  | { kind: "accept" | "drop" | "reject" | "return" | "queue" | "continue" }
  | { kind: "jump" | "goto"; chain: string }
  | { kind: "nat"; how: string }
  | { kind: "mark"; op: "set" | "xor" | "or" | "and"; value: number; mask: number }
  /** The packet leaves conntrack (`-j NOTRACK`, `-j CT --notrack`, nft `notrack`): state UNTRACKED, no NAT. */
  | { kind: "notrack" }
  | { kind: "vmap"; entries: { matches: Match[]; action: Action }[] }
  | { kind: "unknown"; text: string };

/** One rule: its matches, its action, and its text (untrusted: shown through safeText). */
export interface Rule {
  matches: Match[];
  action: Action;
  /** Marks set before the action (nft `meta mark set 0x1 accept`): applied when the rule matches. */
  effects: Action[];
  /** The rule as its tool lists it (iptables-save's `-A …` line; nft: a rendering of its JSON). */
  text: string;
  /** nft rule handle (for `nft delete rule … handle N`), or null. */
  handle: number | null;
}

/** A chain: base chains have a hook, a priority, a type and a policy. */
export interface Chain {
  name: string;
  rules: Rule[];
  hook: Hook | null;
  priority: number;
  /** "filter", "nat", "route". */
  type: string;
  /** "accept" or "drop" (base chains); "return" for a user chain. */
  policy: "accept" | "drop" | "return";
  /** netdev ingress chains: the device they are bound to. */
  device: string | null;
}

/** One table of one back-end. */
export interface Table {
  backend: Backend;
  /** nft family ("ip", "ip6", "inet", "netdev", …); iptables: "ip" / "ip6". */
  family: string;
  name: string;
  chains: Map<string, Chain>;
}

/** Where a rule lives, as a report names it. */
export interface RuleRef {
  backend: Backend;
  family: string;
  table: string;
  /** The chain holding the rule (a sub-chain when reached by a jump). */
  chain: string;
  /** 1-based position in that chain. */
  position: number;
  /** The rule's text, untrusted (print through safeText). */
  text: string;
  handle: number | null;
}

/** A base chain's verdict for the packet. */
export type StepVerdict = "accept" | "drop" | "reject" | "queue" | "nat" | "skipped" | "unknown";

/** What one base chain did with the packet. */
export interface Step {
  hook: Hook;
  backend: Backend;
  family: string;
  table: string;
  /** The base chain. */
  chain: string;
  priority: number;
  verdict: StepVerdict;
  /** The rule that decided, or null when the chain's policy (or its end) did. */
  rule: RuleRef | null;
  /** The jumps taken to reach `rule` (`INPUT → ufw-user-input`). */
  via: string[];
  /** Why the step is unknown or skipped. */
  note?: string;
}

/** A path's verdict: every base chain it crossed, the first that drops, or why it cannot tell. */
export interface PathVerdict {
  verdict: "pass" | "drop" | "unknown";
  /** Base chains crossed, in order, until the end or the drop (the walk that assumes no unknown match). */
  steps: Step[];
  /** The step that dropped (verdict drop, reject or queue), or null. */
  dropped: Step | null;
  /** When unknown: "unknown match: <text>" (or another honest reason). */
  reason: string | null;
  /** The NAT a nat chain applied (masquerade, snat, dnat, redirect), or null. */
  nat: Step | null;
}
