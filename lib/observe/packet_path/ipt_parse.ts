/**
 * iptables-save text (legacy or nft back-end) → tables of chains and rules for the packet-path
 * evaluator. The text is untrusted and bounded: at most {@link MAX_TEXT} characters, {@link MAX_RULES}
 * rules, {@link MAX_LINE} characters a line; an option this parser does not know becomes an `unknown`
 * match holding its text, never a guess.
 * @module
 */
import { IPAddr, IPNet } from "../../base/cidr.ts";
import type { Action, AddrSpec, Backend, Chain, Hook, Match, PortRange, Rule, Table } from "./types.ts";
import { PROTO } from "./types.ts";

/** Longest dump parsed (characters). */
export const MAX_TEXT = 32 * 1024 * 1024;
/** Most rules parsed from one dump. */
export const MAX_RULES = 200_000;
/** Longest rule line parsed; a longer one is one unknown match. */
export const MAX_LINE = 8192;

/** The built-in chains of each iptables table: hook and priority (the kernel's NF_IP_PRI_*). */
const BUILTIN: Record<string, Record<string, [Hook, number]>> = {
  raw: { PREROUTING: ["prerouting", -300], OUTPUT: ["output", -300] },
  mangle: {
    PREROUTING: ["prerouting", -150],
    INPUT: ["input", -150],
    FORWARD: ["forward", -150],
    OUTPUT: ["output", -150],
    POSTROUTING: ["postrouting", -150],
  },
  nat: {
    PREROUTING: ["prerouting", -100],
    INPUT: ["input", 100],
    OUTPUT: ["output", -100],
    POSTROUTING: ["postrouting", 100],
  },
  filter: { INPUT: ["input", 0], FORWARD: ["forward", 0], OUTPUT: ["output", 0] },
  security: { INPUT: ["input", 50], FORWARD: ["forward", 50], OUTPUT: ["output", 50] },
};

/** Targets that do not end the chain walk (they log, mark or set conntrack things). */
const NON_TERMINAL = new Set([
  "LOG",
  "NFLOG",
  "ULOG",
  "TRACE",
  "CONNMARK",
  "TCPMSS",
  "CHECKSUM",
  "CLASSIFY",
  "DSCP",
  "TOS",
  "TTL",
  "HL",
  "AUDIT",
  "CONNSECMARK",
  "SECMARK",
  "IDLETIMER",
  "LED",
  "SET",
  "RATEEST",
  "HMARK",
  "TEE",
]);
const NAT_TARGETS = new Set(["MASQUERADE", "SNAT", "DNAT", "REDIRECT", "NETMAP"]);

/** Splits a rule line into words as iptables-save quotes them (double quotes, backslash escapes). */
export function iptWords(line: string): string[] {
  const out: string[] = [];
  let cur = "";
  let inWord = false;
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === "\\" && i + 1 < line.length) cur += line[++i];
      else if (c === '"') quoted = false;
      else cur += c;
    } else if (c === '"') {
      quoted = true;
      inWord = true;
    } else if (c === " " || c === "\t") {
      if (inWord) out.push(cur);
      cur = "";
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (inWord) out.push(cur);
  return out;
}

/** `a/b` with a prefix length or a contiguous dotted mask; null otherwise. */
export function parseIptAddr(s: string): AddrSpec | null {
  const [a, m] = s.split("/", 2);
  const ip = IPAddr.tryParse(a);
  if (!ip) return null;
  if (m === undefined) return { net: new IPNet(ip, ip.bits) };
  if (/^\d{1,3}$/.test(m)) {
    const p = Number(m);
    return p <= ip.bits ? { net: new IPNet(ip, p) } : null;
  }
  const mask = IPAddr.tryParse(m);
  if (!mask || mask.family !== ip.family) return null;
  const bin = mask.value.toString(2).padStart(ip.bits, "0");
  if (!/^1*0*$/.test(bin)) return null;
  return { net: new IPNet(ip, bin.indexOf("0") < 0 ? ip.bits : bin.indexOf("0")) };
}

/** `N`, `N:M`, `:M`, `N:` → an inclusive range; null when not a port. */
export function parsePortRange(s: string): PortRange | null {
  const m = /^(\d{0,5})(?:[:-](\d{0,5}))?$/.exec(s);
  if (!m || (m[1] === "" && m[2] === undefined)) return null;
  const lo = m[1] === "" ? 0 : Number(m[1]);
  const hi = m[2] === undefined ? lo : m[2] === "" ? 65535 : Number(m[2]);
  return lo <= hi && hi <= 65535 ? [lo, hi] : null;
}

function protoNumber(s: string): number | null {
  const l = s.toLowerCase();
  if (/^\d{1,3}$/.test(l)) return Number(l) <= 255 ? Number(l) : null;
  return PROTO[l] ?? null;
}

const ICMP_TYPES: Record<string, number> = {
  "echo-reply": 0,
  "destination-unreachable": 3,
  "echo-request": 8,
  "time-exceeded": 11,
  "parameter-problem": 12,
};
const ICMP6_TYPES: Record<string, number> = {
  "destination-unreachable": 1,
  "packet-too-big": 2,
  "time-exceeded": 3,
  "parameter-problem": 4,
  "echo-request": 128,
  "echo-reply": 129,
};

const TCP_FLAGS: Record<string, number> = {
  FIN: 1,
  SYN: 2,
  RST: 4,
  PSH: 8,
  ACK: 16,
  URG: 32,
  ECE: 64,
  CWR: 128,
  ALL: 255,
  NONE: 0,
};

function tcpFlags(s: string): number | null {
  let v = 0;
  for (const f of s.split(",")) {
    const b = TCP_FLAGS[f.toUpperCase()];
    if (b === undefined) return null;
    v |= b;
  }
  return v;
}

/** `0x4000/0x4000` or `16384` → value and mask. */
function markValue(s: string): { value: number; mask: number } | null {
  const [v, m] = s.split("/", 2);
  const num = (x: string) => /^(0x[0-9a-f]{1,8}|\d{1,10})$/i.test(x) ? Number(x) >>> 0 : null;
  const value = num(v);
  const mask = m === undefined ? 0xffffffff : num(m);
  return value === null || mask === null ? null : { value, mask };
}

/** The matches and action of one rule's words (after `-A CHAIN`). */
export function parseIptRule(words: string[], family: 4 | 6): { matches: Match[]; action: Action } {
  const matches: Match[] = [];
  let action: Action = { kind: "continue" };
  let module = "";
  let neg = false;
  let i = 0;
  const next = () => words[++i] ?? "";
  /** The rest of an unknown option: the option and its non-option words. */
  const unknownOpt = (opt: string) => {
    const parts = [neg ? `! ${opt}` : opt];
    while (i + 1 < words.length && !words[i + 1].startsWith("-") && words[i + 1] !== "!") parts.push(next());
    matches.push({ kind: "unknown", text: `${module ? `-m ${module} ` : ""}${parts.join(" ")}` });
  };
  for (; i < words.length; i++) {
    const w = words[i];
    if (w === "!") {
      neg = true;
      continue;
    }
    switch (w) {
      case "-s":
      case "--source":
      case "-d":
      case "--destination": {
        const v = next();
        const specs = v.split(",").map(parseIptAddr);
        const field = w === "-s" || w === "--source" ? "src" : "dst";
        if (specs.some((s) => s === null)) matches.push({ kind: "unknown", text: `${w} ${v}` });
        else matches.push({ kind: "addr", field, addrs: specs as AddrSpec[], neg });
        break;
      }
      case "-i":
      case "--in-interface":
      case "-o":
      case "--out-interface":
        matches.push({
          kind: "iface",
          field: w.startsWith("-i") || w === "--in-interface" ? "in" : "out",
          names: [next()],
          neg,
        });
        break;
      case "-p":
      case "--protocol": {
        const v = next();
        if (v === "all" || v === "0") {
          if (neg) matches.push({ kind: "proto", protos: [], neg: false });
          break;
        }
        const p = protoNumber(v);
        if (p === null) matches.push({ kind: "unknown", text: `-p ${v}` });
        else matches.push({ kind: "proto", protos: [p], neg });
        break;
      }
      case "-f":
      case "--fragment":
        matches.push({ kind: "fragment", neg });
        break;
      case "-m":
      case "--match":
        module = next();
        break;
      case "-j":
      case "--jump":
      case "-g":
      case "--goto":
        action = iptTarget(w, words.slice(i + 1), family);
        i = words.length;
        break;
      case "--dport":
      case "--destination-port":
      case "--sport":
      case "--source-port": {
        const v = next();
        const r = parsePortRange(v);
        const field = w === "--dport" || w === "--destination-port" ? "dport" : "sport";
        if (!r || !["tcp", "udp", "sctp", "dccp", "udplite", ""].includes(module)) {
          matches.push({ kind: "unknown", text: `${module ? `-m ${module} ` : ""}${w} ${v}` });
        } else matches.push({ kind: "port", field, ranges: [r], neg });
        break;
      }
      case "--dports":
      case "--destination-ports":
      case "--sports":
      case "--source-ports":
      case "--ports": {
        const v = next();
        const rs = v.split(",").map(parsePortRange);
        const field = w === "--ports" ? "either" : w.startsWith("--d") ? "dport" : "sport";
        if (rs.some((r) => r === null)) matches.push({ kind: "unknown", text: `-m multiport ${w} ${v}` });
        else matches.push({ kind: "port", field, ranges: rs as PortRange[], neg });
        break;
      }
      case "--ctstate":
      case "--state":
        matches.push({ kind: "ctstate", states: next().toLowerCase().split(","), neg });
        break;
      case "--ctstatus":
        matches.push({ kind: "ctstatus", flags: next().toLowerCase().split(","), neg });
        break;
      case "--comment":
        next();
        break;
      case "--src-type":
      case "--dst-type":
        matches.push({
          kind: "addrtype",
          field: w === "--src-type" ? "src" : "dst",
          types: next().toUpperCase().split(","),
          neg,
        });
        break;
      case "--mark": {
        const v = next();
        const m = module === "mark" ? markValue(v) : null;
        if (!m) matches.push({ kind: "unknown", text: `-m ${module} --mark ${v}` });
        else matches.push({ kind: "mark", ...m, neg });
        break;
      }
      case "--pkt-type":
        matches.push({ kind: "pkttype", types: [next().toLowerCase()], neg });
        break;
      case "--icmp-type":
      case "--icmpv6-type": {
        const v = next();
        const names = w === "--icmp-type" ? ICMP_TYPES : ICMP6_TYPES;
        const t = /^\d{1,3}$/.test(v) ? Number(v) : v === "any" ? -1 : names[v] ?? null;
        if (t === null) matches.push({ kind: "unknown", text: `${w} ${v}` });
        else {
          matches.push({ kind: "proto", protos: [family === 4 ? 1 : 58], neg: false });
          if (t >= 0) matches.push({ kind: "icmptype", types: [t], neg });
        }
        break;
      }
      case "--syn":
        matches.push({ kind: "tcpflags", mask: 0x17, comp: 0x02, neg });
        break;
      case "--tcp-flags": {
        const mask = tcpFlags(next()), comp = tcpFlags(next());
        if (mask === null || comp === null) {
          matches.push({ kind: "unknown", text: `--tcp-flags ${words[i - 1]} ${words[i]}` });
        } else matches.push({ kind: "tcpflags", mask, comp, neg });
        break;
      }
      case "--src-range":
      case "--dst-range": {
        const v = next();
        const [a, b] = v.split("-", 2).map((x) => IPAddr.tryParse(x ?? ""));
        if (!a || !b) matches.push({ kind: "unknown", text: `-m iprange ${w} ${v}` });
        else {matches.push({
            kind: "addr",
            field: w === "--src-range" ? "src" : "dst",
            addrs: [{ lo: a, hi: b }],
            neg,
          });}
        break;
      }
      default:
        unknownOpt(w);
    }
    neg = false;
  }
  return { matches, action };
}

/** The action of `-j TARGET [options]` / `-g CHAIN`. */
function iptTarget(flag: string, rest: string[], _family: 4 | 6): Action {
  const t = rest[0] ?? "";
  if (flag === "-g" || flag === "--goto") return { kind: "goto", chain: t };
  switch (t) {
    case "ACCEPT":
      return { kind: "accept" };
    case "DROP":
      return { kind: "drop" };
    case "REJECT":
      return { kind: "reject" };
    case "RETURN":
      return { kind: "return" };
    case "NOTRACK":
      return { kind: "notrack" };
    case "CT":
      return rest.includes("--notrack") ? { kind: "notrack" } : { kind: "continue" };
    case "QUEUE":
    case "NFQUEUE":
      return { kind: "queue" };
    case "MARK": {
      const op = rest[1] ?? "";
      const m = markValue(rest[2] ?? "");
      const ops: Record<string, "set" | "xor" | "or" | "and"> = {
        "--set-xmark": "set",
        "--set-mark": "set",
        "--xor-mark": "xor",
        "--or-mark": "or",
        "--and-mark": "and",
      };
      if (!m || !ops[op]) return { kind: "unknown", text: `-j MARK ${rest.slice(1).join(" ")}` };
      // --set-xmark v/m: mark = (mark & ~m) ^ v; --set-mark v/m: (mark & ~m) | v (same for our use).
      return { kind: "mark", op: ops[op], value: m.value, mask: m.mask };
    }
  }
  if (NAT_TARGETS.has(t)) return { kind: "nat", how: t.toLowerCase() };
  if (NON_TERMINAL.has(t)) return { kind: "continue" };
  return { kind: "jump", chain: t };
}

/** What {@link parseIptSave} returns: the tables, or why it could not read them. */
export type IptParse = { tables: Table[]; error: null } | { tables: Table[]; error: string };

/**
 * Every table of one iptables-save dump. `backend` names where it came from; `family` 4 for
 * iptables-save, 6 for ip6tables-save. A jump to a chain the dump does not declare becomes an unknown
 * target.
 */
export function parseIptSave(text: string, backend: Backend, family: 4 | 6): IptParse {
  if (text.length > MAX_TEXT) return { tables: [], error: `dump too large (${text.length} characters)` };
  const tables: Table[] = [];
  let table: Table | null = null;
  let rules = 0;
  for (const raw of text.split("\n")) {
    const line = raw.trimEnd();
    if (line.startsWith("*")) {
      const name = line.slice(1);
      table = { backend, family: family === 4 ? "ip" : "ip6", name, chains: new Map() };
      tables.push(table);
    } else if (!table || line === "" || line.startsWith("#")) continue;
    else if (line === "COMMIT") table = null;
    else if (line.startsWith(":")) {
      const [name, pol] = line.slice(1).split(" ");
      const b = BUILTIN[table.name]?.[name];
      table.chains.set(name, {
        name,
        rules: [],
        hook: b ? b[0] : null,
        priority: b ? b[1] : 0,
        type: table.name === "nat" ? "nat" : "filter",
        policy: !b ? "return" : pol === "DROP" ? "drop" : "accept",
        device: null,
      });
    } else if (line.startsWith("-A ")) {
      if (++rules > MAX_RULES) return { tables, error: `more than ${MAX_RULES} rules` };
      const name = line.slice(3).split(" ", 1)[0];
      const chain = table.chains.get(name);
      if (!chain) continue;
      if (line.length > MAX_LINE) {
        chain.rules.push({
          matches: [{ kind: "unknown", text: `${line.slice(0, 80)}… (${line.length} characters)` }],
          action: { kind: "unknown", text: "rule too long to read" },
          effects: [],
          text: line.slice(0, MAX_LINE),
          handle: null,
        });
        continue;
      }
      const { matches, action } = parseIptRule(iptWords(line).slice(2), family);
      chain.rules.push({ matches, action, effects: [], text: line, handle: null });
    }
  }
  for (const t of tables) fixJumps(t);
  return { tables, error: null };
}

/** A jump to a chain the table does not have: an unknown target (iptables-save lists every chain). */
function fixJumps(t: Table): void {
  for (const c of t.chains.values()) {
    c.rules = c.rules.map((r): Rule => {
      const a = r.action;
      if ((a.kind === "jump" || a.kind === "goto") && !t.chains.has(a.chain)) {
        return { ...r, action: { kind: "unknown", text: `unknown target: -j ${a.chain}` } };
      }
      return r;
    });
  }
}

/** The chains a table declares, for tests and reports. */
export function chainNames(t: Table): string[] {
  return [...t.chains.keys()];
}

/** Exported for the nft parser: a chain record with defaults. */
export function userChain(name: string): Chain {
  return { name, rules: [], hook: null, priority: 0, type: "filter", policy: "return", device: null };
}
