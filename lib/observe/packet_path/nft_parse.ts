/**
 * `nft -j list ruleset` → tables of chains and rules for the packet-path evaluator. The JSON is untrusted:
 * every field is type-checked, at most {@link MAX_OBJECTS} objects are read, and an expression this parser
 * does not know becomes an `unknown` match (or action) holding a bounded rendering of it, never a guess.
 * @module
 */
import { IPAddr, IPNet } from "../../base/cidr.ts";
import { safeJson } from "../../base/capped_read.ts";
import type { Action, AddrSpec, Chain, Hook, Match, PortRange, Rule, Table } from "./types.ts";
import { PROTO } from "./types.ts";
import { userChain } from "./ipt_parse.ts";

/** Most ruleset objects (tables, chains, rules, sets) read. */
export const MAX_OBJECTS = 200_000;

type J = unknown;
const isObj = (v: J): v is Record<string, J> => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: J): string | null => typeof v === "string" ? v : null;

const HOOKS = new Set<Hook>(["ingress", "prerouting", "input", "forward", "output", "postrouting"]);
const PORT_PROTOS: Record<string, number> = { tcp: 6, udp: 17, sctp: 132, dccp: 33, udplite: 136 };
const ICMP_TYPES: Record<string, number> = {
  "echo-reply": 0,
  "destination-unreachable": 3,
  "echo-request": 8,
  "time-exceeded": 11,
  "parameter-problem": 12,
  "packet-too-big": 2,
  "nd-router-solicit": 133,
  "nd-router-advert": 134,
  "nd-neighbor-solicit": 135,
  "nd-neighbor-advert": 136,
};
const ICMP6_TYPES: Record<string, number> = {
  "destination-unreachable": 1,
  "packet-too-big": 2,
  "time-exceeded": 3,
  "parameter-problem": 4,
  "echo-request": 128,
  "echo-reply": 129,
  "nd-router-solicit": 133,
  "nd-router-advert": 134,
  "nd-neighbor-solicit": 135,
  "nd-neighbor-advert": 136,
};
const TCP_FLAG_BITS: Record<string, number> = {
  fin: 1,
  syn: 2,
  rst: 4,
  psh: 8,
  ack: 16,
  urg: 32,
  ecn: 64,
  cwr: 128,
};

/** Named sets of a table: their elements as JSON values. */
type Sets = Map<string, J[]>;

/** The values of a right-hand side: one value, an anonymous set, a list (flags), or a named set. */
function rightValues(right: J, sets: Sets): J[] | null {
  if (Array.isArray(right)) return right;
  if (isObj(right) && Array.isArray(right.set)) return right.set;
  const s = str(right);
  if (s?.startsWith("@")) return sets.get(s.slice(1)) ?? null;
  return [right];
}

function addrSpec(v: J): AddrSpec | null {
  if (typeof v === "string") {
    const ip = IPAddr.tryParse(v);
    return ip ? { net: new IPNet(ip, ip.bits) } : null;
  }
  if (!isObj(v)) return null;
  if (isObj(v.prefix)) {
    const ip = IPAddr.tryParse(str(v.prefix.addr) ?? "");
    const len = v.prefix.len;
    return ip && typeof len === "number" && Number.isInteger(len) && len >= 0 && len <= ip.bits
      ? { net: new IPNet(ip, len) }
      : null;
  }
  if (Array.isArray(v.range) && v.range.length === 2) {
    const lo = IPAddr.tryParse(str(v.range[0]) ?? ""), hi = IPAddr.tryParse(str(v.range[1]) ?? "");
    return lo && hi && lo.family === hi.family ? { lo, hi } : null;
  }
  if (isObj(v.elem)) return addrSpec(v.elem.val);
  return null;
}

function portRange(v: J): PortRange | null {
  if (typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 65535) return [v, v];
  if (isObj(v) && Array.isArray(v.range) && v.range.length === 2) {
    const [a, b] = v.range.map((x) => portRange(x));
    return a && b && a[0] <= b[0] ? [a[0], b[0]] : null;
  }
  if (isObj(v) && isObj(v.elem)) return portRange(v.elem.val);
  return null;
}

function protoNum(v: J): number | null {
  if (typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 255) return v;
  const s = str(v);
  return s !== null ? PROTO[s] ?? null : null;
}

/** `all` mapped with `f`, or null when any is null. */
function allOf<T>(vs: J[], f: (v: J) => T | null): T[] | null {
  const out: T[] = [];
  for (const v of vs) {
    const x = f(v);
    if (x === null) return null;
    out.push(x);
  }
  return out;
}

/** A bounded, nft-like rendering of an expression (for rule texts and unknown matches). */
export function renderExpr(e: J): string {
  if (typeof e === "string" || typeof e === "number" || typeof e === "boolean") return String(e);
  if (Array.isArray(e)) return e.map(renderExpr).join(",");
  if (!isObj(e)) return safeJson(e);
  if (isObj(e.payload)) return `${str(e.payload.protocol) ?? "?"} ${str(e.payload.field) ?? "?"}`;
  if (isObj(e.meta)) return `meta ${str(e.meta.key) ?? "?"}`;
  if (isObj(e.ct)) return `ct ${str(e.ct.key) ?? "?"}`;
  if (isObj(e.fib)) {
    const flags = Array.isArray(e.fib.flags) ? e.fib.flags.map((f) => String(f)).join(" . ") : "?";
    return `fib ${flags} ${str(e.fib.result) ?? "?"}`;
  }
  if (Array.isArray(e.set)) return `{ ${e.set.map(renderExpr).join(", ")} }`;
  if (isObj(e.prefix)) return `${renderExpr(e.prefix.addr)}/${renderExpr(e.prefix.len)}`;
  if (Array.isArray(e.range)) return e.range.map(renderExpr).join("-");
  if (Array.isArray(e["&"])) return `${renderExpr(e["&"][0])} & ${renderExpr(e["&"][1])}`;
  return safeJson(e, 80);
}

/** One statement rendered as nft lists it (roughly: for reports, never parsed back). */
function renderStmt(s: J): string {
  if (!isObj(s)) return safeJson(s, 80);
  const k = Object.keys(s)[0] ?? "";
  const v = s[k];
  if (k === "match" && isObj(v)) {
    const op = v.op === "==" || v.op === "in" ? "" : `${str(v.op) ?? "?"} `;
    return `${renderExpr(v.left)} ${op}${renderExpr(v.right)}`;
  }
  if (k === "jump" || k === "goto") return `${k} ${isObj(v) ? str(v.target) ?? "?" : "?"}`;
  if (k === "vmap" && isObj(v)) return `${renderExpr(v.key)} vmap ${safeJson(v.data, 120)}`;
  if (k === "mangle" && isObj(v)) return `${renderExpr(v.key)} set ${renderExpr(v.value)}`;
  if (k === "reject" && isObj(v)) return `reject with ${str(v.type) ?? ""} ${str(v.expr) ?? ""}`.trim();
  if (k === "counter" || k === "log" || v === null) return k;
  return `${k} ${safeJson(v, 80)}`;
}

/**
 * One `match` statement → a match. `inet` adds the family the address/protocol field implies; the
 * match for an expression this parser does not know is `unknown` with its rendering.
 */
export function matchOf(op: J, left: J, right: J, sets: Sets, inet: boolean): Match[] {
  const text = `${renderExpr(left)} ${op === "==" || op === "in" ? "" : `${String(op)} `}${
    renderExpr(right)
  }`;
  const unknown: Match[] = [{ kind: "unknown", text }];
  let neg: boolean;
  if (op === "==" || op === "in") neg = false;
  else if (op === "!=") neg = true;
  else if (["<", ">", "<=", ">="].includes(String(op)) && isObj(left) && isObj(left.payload)) {
    const r = typeof right === "number" ? right : -1;
    if (r < 0 || !["dport", "sport"].includes(String(left.payload.field))) return unknown;
    const range: PortRange = op === "<"
      ? [0, r - 1]
      : op === "<="
      ? [0, r]
      : op === ">"
      ? [r + 1, 65535]
      : [r, 65535];
    return matchOf("==", left, { range }, sets, inet);
  } else return unknown;
  const values = rightValues(right, sets);
  if (values === null) return unknown;
  if (isObj(left) && Array.isArray(left.concat)) {
    // `a . b . c` against one `x . y . z`: each part its own match (a verdict map's entry).
    const parts = left.concat;
    const v = values.length === 1 && isObj(values[0]) && Array.isArray(values[0].concat)
      ? values[0].concat
      : null;
    if (neg || !v || v.length !== parts.length) return unknown;
    const out = parts.flatMap((p, i) => matchOf("==", p, v[i], sets, inet));
    return out.some((m) => m.kind === "unknown") ? unknown : out;
  }
  if (isObj(left) && isObj(left.payload)) {
    const proto = str(left.payload.protocol) ?? "";
    const field = str(left.payload.field) ?? "";
    const fam: Match[] = inet && (proto === "ip" || proto === "ip6")
      ? [{ kind: "nfproto", family: proto === "ip" ? 4 : 6, neg: false }]
      : [];
    if ((proto === "ip" || proto === "ip6") && (field === "saddr" || field === "daddr")) {
      const addrs = allOf(values, addrSpec);
      return addrs
        ? [...fam, { kind: "addr", field: field === "saddr" ? "src" : "dst", addrs, neg }]
        : unknown;
    }
    if ((proto === "ip" && field === "protocol") || (proto === "ip6" && field === "nexthdr")) {
      const protos = allOf(values, protoNum);
      return protos ? [...fam, { kind: "proto", protos, neg }] : unknown;
    }
    if ((proto in PORT_PROTOS || proto === "th") && (field === "dport" || field === "sport")) {
      const ranges = allOf(values, portRange);
      if (!ranges) return unknown;
      const p: Match[] = proto === "th" ? [] : [{ kind: "proto", protos: [PORT_PROTOS[proto]], neg: false }];
      return [...p, { kind: "port", field, ranges, neg }];
    }
    if ((proto === "icmp" || proto === "icmpv6") && field === "type") {
      const names = proto === "icmp" ? ICMP_TYPES : ICMP6_TYPES;
      const types = allOf(values, (v) => typeof v === "number" ? v : names[str(v) ?? ""] ?? null);
      if (!types) return unknown;
      return [{ kind: "proto", protos: [proto === "icmp" ? 1 : 58], neg: false }, {
        kind: "icmptype",
        types,
        neg,
      }];
    }
    return unknown;
  }
  if (isObj(left) && Array.isArray(left["&"]) && left["&"].length === 2) {
    const [inner, maskJ] = left["&"];
    if (isObj(inner) && isObj(inner.meta) && inner.meta.key === "mark" && typeof maskJ === "number") {
      return typeof right === "number"
        ? [{ kind: "mark", value: right >>> 0, mask: maskJ >>> 0, neg }]
        : unknown;
    }
    if (
      isObj(inner) && isObj(inner.payload) && inner.payload.protocol === "tcp" &&
      inner.payload.field === "flags"
    ) {
      const bits = (v: J) => {
        const list = Array.isArray(v) ? v : [v];
        let b = 0;
        for (const f of list) {
          const x = typeof f === "number" ? f : TCP_FLAG_BITS[str(f) ?? ""];
          if (x === undefined) return null;
          b |= x;
        }
        return b;
      };
      const mask = bits(maskJ), comp = bits(right);
      return mask === null || comp === null ? unknown : [
        { kind: "proto", protos: [6], neg: false },
        { kind: "tcpflags", mask, comp, neg },
      ];
    }
    return unknown;
  }
  if (isObj(left) && isObj(left.meta)) {
    const key = str(left.meta.key) ?? "";
    if (["iifname", "oifname", "iif", "oif"].includes(key)) {
      const names = allOf(values, str);
      return names ? [{ kind: "iface", field: key.startsWith("i") ? "in" : "out", names, neg }] : unknown;
    }
    if (key === "l4proto") {
      const protos = allOf(values, protoNum);
      return protos ? [{ kind: "proto", protos, neg }] : unknown;
    }
    if (key === "nfproto" || key === "protocol") {
      const fams = allOf(
        values,
        (v) => ({ ipv4: 4, ip: 4, ipv6: 6, ip6: 6 } as Record<string, 4 | 6>)[str(v) ?? ""] ?? null,
      );
      if (!fams || fams.length !== 1) return unknown;
      return [{ kind: "nfproto", family: fams[0], neg }];
    }
    if (key === "mark" && values.length === 1 && typeof values[0] === "number") {
      return [{ kind: "mark", value: values[0] >>> 0, mask: 0xffffffff, neg }];
    }
    if (key === "pkttype") {
      const types = allOf(values, str);
      return types ? [{ kind: "pkttype", types, neg }] : unknown;
    }
    return unknown;
  }
  if (isObj(left) && isObj(left.ct)) {
    const key = str(left.ct.key);
    const list = allOf(values, str);
    if (!list) return unknown;
    if (key === "state") return [{ kind: "ctstate", states: list, neg }];
    if (key === "status") return [{ kind: "ctstatus", flags: list, neg }];
    return unknown;
  }
  if (isObj(left) && isObj(left.fib) && left.fib.result === "type" && Array.isArray(left.fib.flags)) {
    const flags = left.fib.flags;
    const types = allOf(values, (v) => str(v)?.toUpperCase() ?? null);
    if (!types || flags.length !== 1 || (flags[0] !== "daddr" && flags[0] !== "saddr")) return unknown;
    return [{ kind: "addrtype", field: flags[0] === "daddr" ? "dst" : "src", types, neg }];
  }
  return unknown;
}

/** A verdict statement → an action; null when `s` is not one. */
function verdictOf(s: Record<string, J>): Action | null {
  if ("accept" in s) return { kind: "accept" };
  if ("drop" in s) return { kind: "drop" };
  if ("reject" in s) return { kind: "reject" };
  if ("return" in s) return { kind: "return" };
  if ("continue" in s) return { kind: "continue" };
  if ("queue" in s) return { kind: "queue" };
  for (const k of ["jump", "goto"] as const) {
    if (k in s) {
      const t = isObj(s[k]) ? str((s[k] as Record<string, J>).target) : null;
      return t ? { kind: k, chain: t } : { kind: "unknown", text: renderStmt(s) };
    }
  }
  for (const k of ["masquerade", "snat", "dnat", "redirect"]) if (k in s) return { kind: "nat", how: k };
  return null;
}

/** Statements that neither match nor decide (they count, log, or change what no match here reads). */
const SIDE_EFFECTS = new Set(["counter", "log", "set", "flow", "ct helper", "synproxy"]);

/** One rule's statements → matches, effects and action. */
export function ruleOf(
  expr: J[],
  sets: Sets,
  inet: boolean,
  maps: Sets = new Map(),
): Pick<Rule, "matches" | "action" | "effects"> {
  const matches: Match[] = [];
  const effects: Action[] = [];
  for (const s of expr) {
    if (!isObj(s)) return { matches, effects, action: { kind: "unknown", text: safeJson(s, 80) } };
    if (isObj(s.match)) {
      matches.push(...matchOf(s.match.op, s.match.left, s.match.right, sets, inet));
      continue;
    }
    const v = verdictOf(s);
    if (v) return { matches, effects, action: v };
    if (isObj(s.vmap)) return { matches, effects, action: vmapOf(s.vmap, sets, maps, inet) };
    if (isObj(s.mangle)) {
      const m = s.mangle;
      if (isObj(m.key) && isObj(m.key.meta) && m.key.meta.key === "mark") {
        const e = markSet(m.value);
        if (!e) return { matches, effects, action: { kind: "unknown", text: renderStmt(s) } };
        effects.push(e);
      }
      continue;
    }
    const k = Object.keys(s)[0] ?? "";
    if (k === "notrack") {
      effects.push({ kind: "notrack" });
      continue;
    }
    if (SIDE_EFFECTS.has(k)) continue;
    // limit, quota, meter, xt and anything newer: whether the rule goes on cannot be told from here.
    matches.push({ kind: "unknown", text: renderStmt(s) });
  }
  const last = effects.pop();
  return { matches, effects, action: last ?? { kind: "continue" } };
}

/** `meta mark set N` or `meta mark set meta mark ^|\||& N` as a mark action; null for anything else. */
function markSet(v: J): Extract<Action, { kind: "mark" }> | null {
  if (typeof v === "number") return { kind: "mark", op: "set", value: v >>> 0, mask: 0xffffffff };
  if (!isObj(v)) return null;
  for (const [k, op] of [["^", "xor"], ["|", "or"], ["&", "and"]] as const) {
    const a = v[k];
    if (Array.isArray(a) && a.length === 2 && isObj(a[0]) && isObj(a[0].meta) && a[0].meta.key === "mark") {
      if (typeof a[1] === "number") return { kind: "mark", op, value: a[1] >>> 0, mask: 0xffffffff };
    }
  }
  return null;
}

function vmapOf(v: Record<string, J>, sets: Sets, maps: Sets, inet: boolean): Action {
  const named = str(v.data)?.startsWith("@") ? maps.get(str(v.data)!.slice(1)) ?? null : null;
  const data = isObj(v.data) && Array.isArray(v.data.set) ? v.data.set : named;
  if (!data) return { kind: "unknown", text: `vmap ${renderExpr(v.key)} ${safeJson(v.data, 80)}` };
  const entries: { matches: Match[]; action: Action }[] = [];
  for (const e of data) {
    if (!Array.isArray(e) || e.length !== 2 || !isObj(e[1])) {
      return { kind: "unknown", text: `vmap entry ${safeJson(e, 80)}` };
    }
    const action = verdictOf(e[1]) ?? { kind: "unknown", text: safeJson(e[1], 80) } as Action;
    entries.push({ matches: matchOf("==", v.key, e[0], sets, inet), action });
  }
  return { kind: "vmap", entries };
}

/** Reads the tables of a `nft -j list ruleset` document; `skip` leaves tables out (iptables-nft's). */
export function parseNftJson(doc: J, skip: (family: string, name: string) => boolean = () => false): Table[] {
  const list = isObj(doc) && Array.isArray(doc.nftables) ? doc.nftables.slice(0, MAX_OBJECTS) : [];
  const tables = new Map<string, Table>();
  const sets = new Map<string, Sets>();
  const maps = new Map<string, Sets>();
  const key = (f: J, t: J) => `${String(f)} ${String(t)}`;
  for (const o of list) {
    if (!isObj(o)) continue;
    if (isObj(o.table)) {
      const family = str(o.table.family), name = str(o.table.name);
      if (!family || !name || skip(family, name)) continue;
      tables.set(key(family, name), { backend: "nftables", family, name, chains: new Map() });
      sets.set(key(family, name), new Map());
      maps.set(key(family, name), new Map());
    } else if (isObj(o.set) || isObj(o.map)) {
      const s = (o.set ?? o.map) as Record<string, J>;
      const name = str(s.name);
      const into = sets.get(key(s.family, s.table));
      // Verdict maps hold [key, verdict] pairs (a vmap's "@name"); other maps are not read.
      const elem = Array.isArray(s.elem) ? s.elem : [];
      if (name && into && isObj(o.set)) into.set(name, elem);
      if (name && isObj(o.map) && s.map === "verdict") maps.get(key(s.family, s.table))?.set(name, elem);
    } else if (isObj(o.chain)) {
      const c = o.chain;
      const t = tables.get(key(c.family, c.table));
      const name = str(c.name);
      if (!t || !name) continue;
      const chain: Chain = userChain(name);
      const hook = str(c.hook) as Hook | null;
      if (hook && HOOKS.has(hook)) {
        chain.hook = hook;
        chain.priority = typeof c.prio === "number" ? c.prio : 0;
        chain.type = str(c.type) ?? "filter";
        chain.policy = c.policy === "drop" ? "drop" : "accept";
        chain.device = str(c.dev);
      }
      t.chains.set(name, chain);
    } else if (isObj(o.rule)) {
      const r = o.rule;
      const t = tables.get(key(r.family, r.table));
      const chain = t?.chains.get(str(r.chain) ?? "");
      if (!t || !chain) continue;
      const expr = Array.isArray(r.expr) ? r.expr : [];
      const tk = key(r.family, r.table);
      const parsed = ruleOf(expr, sets.get(tk)!, t.family === "inet", maps.get(tk)!);
      const a = parsed.action;
      const action: Action = (a.kind === "jump" || a.kind === "goto") && !t.chains.has(a.chain)
        ? { kind: "unknown", text: `${a.kind} to a chain not listed: ${a.chain}` }
        : a;
      chain.rules.push({
        ...parsed,
        action,
        text: expr.map(renderStmt).join(" "),
        handle: typeof r.handle === "number" ? r.handle : null,
      });
    }
  }
  return [...tables.values()];
}
