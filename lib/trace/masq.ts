/**
 * The masquerade decision for one packet: walks the nat table's POSTROUTING chain as iptables-save shows
 * it (jumps into user chains, RETURN, MASQUERADE/SNAT) matching only what flannel's and kube-proxy's
 * postrouting rules use (`-s`, `-d`, their negations, `-o`, `-m mark [!] --mark`: the traced packet carries no
 * mark — kube-proxy marks only the Service traffic it DNATs, flannel none); a rule with any other match is
 * skipped as not matching, and reported.
 * @module
 */
import { IPAddr, IPNet } from "../base/cidr.ts";

/** The decision and the rule that made it. */
export interface MasqDecision {
  /** True when the packet would be source-NATed. */
  nat: boolean;
  /** The deciding rule (`-A CHAIN …`), or null when no rule matched (chain policy ACCEPT: not NATed). */
  rule: string | null;
  /** Rules skipped because they use matches this walk does not evaluate (e.g. `-m conntrack`). */
  skipped: string[];
}

function rulesOf(nat: string, chain: string): string[] {
  return nat.split("\n").filter((l) => l.startsWith(`-A ${chain} `));
}

/** Does `-s/-d [!] CIDR` hold for `ip`? */
function netMatch(ip: IPAddr, cidr: string, neg: boolean): boolean {
  const net = IPNet.tryParse(cidr.includes("/") ? cidr : `${cidr}/${ip.family === 6 ? 128 : 32}`);
  if (!net || net.ip.family !== ip.family) return neg;
  return net.contains(ip) !== neg;
}

/** The rule without its comments (their text is no match or target). */
function uncommented(rule: string): string {
  return rule.replace(/-m comment --comment ("[^"]*"|\S+)/g, "");
}

/** Does the rule's match part hold for the packet? null when it uses an unsupported match. */
function matches(rule: string, src: IPAddr, dst: IPAddr, oif: string | null): boolean | null {
  const w = uncommented(rule).split(/\s+/).filter(Boolean);
  let i = 2; // "-A CHAIN"
  for (; i < w.length; i++) {
    let neg = false;
    if (w[i] === "!") {
      neg = true;
      i++;
    }
    const k = w[i], v = w[i + 1];
    if (k === "-j" || k === "-g") return true;
    if (k === "-m" && v === "mark" && !neg) {
      i++;
      continue;
    }
    if (k === "--mark") {
      // An unmarked packet (mark 0) matches VALUE[/MASK] when VALUE is 0.
      const value = Number((v ?? "").split("/")[0]);
      if (!Number.isFinite(value)) return null;
      if ((value === 0) === neg) return false;
      i++;
      continue;
    }
    if (k === "-s" || k === "--source") {
      if (!netMatch(src, v, neg)) return false;
    } else if (k === "-d" || k === "--destination") {
      if (!netMatch(dst, v, neg)) return false;
    } else if (k === "-o" || k === "--out-interface") {
      if (oif === null) return null;
      const m = v.endsWith("+") ? oif.startsWith(v.slice(0, -1)) : oif === v;
      if (m === neg) return false;
    } else return null;
    i++;
  }
  return true;
}

function target(rule: string): string | null {
  return /\s-[jg]\s+(\S+)/.exec(uncommented(rule))?.[1] ?? null;
}

/**
 * Walks `chain` (default POSTROUTING) of the nat table text (`*nat` … of iptables-save) for a packet
 * `src` → `dst` leaving through `oif`.
 */
export function masqDecision(
  nat: string,
  src: string,
  dst: string,
  oif: string | null,
  chain = "POSTROUTING",
): MasqDecision {
  const s = IPAddr.parse(src, "src"), d = IPAddr.parse(dst, "dst");
  const skipped: string[] = [];
  let lastReturn: string | null = null;
  const walk = (ch: string, depth: number): { verdict: "nat" | "accept" | "return"; rule: string } | null => {
    if (depth > 8) return null;
    for (const r of rulesOf(nat, ch)) {
      const m = matches(r, s, d, oif);
      if (m === null) {
        skipped.push(r);
        continue;
      }
      if (!m) continue;
      const t = target(r);
      if (t === "MASQUERADE" || t === "SNAT") return { verdict: "nat", rule: r };
      if (t === "RETURN") return { verdict: "return", rule: r };
      if (t === "ACCEPT") return { verdict: "accept", rule: r };
      if (t && /^[A-Z0-9_-]+$/i.test(t) && rulesOf(nat, t).length) {
        const sub = walk(t, depth + 1);
        if (sub && sub.verdict !== "return") return sub;
        // RETURN from a user chain (flannel's "not between pods"): back to the caller's next rule.
        if (sub) lastReturn = sub.rule;
      }
    }
    return null;
  };
  const v = walk(chain, 0);
  if (v) return { nat: v.verdict === "nat", rule: v.rule, skipped };
  return { nat: false, rule: lastReturn, skipped };
}
