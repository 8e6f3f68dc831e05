/**
 * The plan as nft text: the whole table (start-up and repair: `add table` + `delete table` + the table, one
 * transaction, so the old rules stay until the new ones replace them) and the change between two plans
 * (one transaction that adds, flushes or deletes only the sets, elements, chains and map entries that
 * differ).
 *
 * The table (`inet flanctl-netpol`): base chain `forward` (hook forward, priority filter) accepts replies
 * (`ct state established,related`), then jumps to `egress` (the source's chain through maps `eg4`/`eg6`)
 * and `ingress` (the destination's, maps `in4`/`in6`). A pod chain `eg-…` ends in `counter drop`, its rules
 * `return` (on to ingress); `in-…` ends in `drop`, its rules `accept`. While a local pod that a policy
 * isolates has no address yet, the dispatch chains also drop what leaves (enters) an address of this
 * node's pod CIDRs (`local4`/`local6`) that no known local pod holds (`known4`/`known6`).
 * @module
 */
import type { IPFamily } from "../base/cidr.ts";
import { FIXED_SETS, type MapName, type Plan, type PlanRule, type PlanSet, type PodChain } from "./plan.ts";

/** Our table's name (family inet). */
export const TABLE = "flanctl-netpol";
const T = `inet ${TABLE}`;
const MAPS: readonly MapName[] = ["in4", "in6", "eg4", "eg6"];

function ipKw(f: IPFamily): "ip" | "ip6" {
  return f === 4 ? "ip" : "ip6";
}

/** A name for an nft comment (at most 128 bytes): API names only, cut to 100 characters. */
function commentText(s: string): string {
  const t = s.replace(/[^a-z0-9./-]/g, "");
  return t.length > 100 ? t.slice(0, 100) : t;
}

/** One allow rule's text. */
export function ruleText(dir: "ingress" | "egress", r: PlanRule): string {
  return `${ruleMatch(dir, r)} comment "${commentText(r.policy)} ${dir}[${r.rule}]"`;
}

/** One allow rule's matches and verdict (its text without the comment). */
function ruleMatch(dir: "ingress" | "egress", r: PlanRule): string {
  const ip = ipKw(r.family);
  const parts = [`meta nfproto ipv${r.family}`];
  if (r.proto) parts.push(`meta l4proto ${r.proto.toLowerCase()}`);
  if (r.peer) parts.push(`${ip} ${dir === "ingress" ? "saddr" : "daddr"} @${r.peer}`);
  if (r.ports) {
    const [a, b] = r.ports[0];
    parts.push(`th dport ${r.portSet ? `@${r.portSet}` : a === b ? a : `${a}-${b}`}`);
  }
  if (r.named) parts.push(`${ip} daddr . th dport @${r.named}`);
  parts.push(dir === "ingress" ? "accept" : "return");
  return parts.join(" ");
}

/** Rendered chains (a plan is not changed once compiled: the diff against it reuses its text). */
const rendered = new WeakMap<PodChain, string[]>();

function chainLines(c: PodChain): string[] {
  let lines = rendered.get(c);
  if (!lines) {
    // A rule that matches exactly what an earlier rule of the chain matches, with the same verdict, can
    // never decide a packet: it is left out (several policies often allow the same peers and ports; their
    // chains keep the first one's comment, and `flanctl trace` reads the policies, not the kernel's rules).
    const seen = new Set<string>();
    lines = [];
    for (const r of c.rules) {
      const m = ruleMatch(c.dir, r);
      if (seen.has(m)) continue;
      seen.add(m);
      lines.push(`${m} comment "${commentText(r.policy)} ${c.dir}[${r.rule}]"`);
    }
    lines.push(`counter drop comment "${commentText(c.pod)}"`);
    rendered.set(c, lines);
  }
  return lines;
}

/** The dispatch chains' rules (they change only with the pending flags). */
function dispatchLines(plan: Plan): Record<"ingress" | "egress", string[]> {
  const out = { ingress: [] as string[], egress: [] as string[] };
  for (const dir of ["egress", "ingress"] as const) {
    const end = dir === "ingress" ? "daddr" : "saddr";
    const m = dir === "ingress" ? "in" : "eg";
    for (const f of [4, 6] as const) out[dir].push(`${ipKw(f)} ${end} vmap @${m}${f}`);
    if (plan.pending[dir]) {
      for (const f of [4, 6] as const) {
        out[dir].push(`${ipKw(f)} ${end} @known${f} return`, `${ipKw(f)} ${end} @local${f} drop`);
      }
    }
  }
  return out;
}

function setDecl(name: string, s: PlanSet): string {
  if (s.kind === "port") return `add set ${T} ${name} { type inet_service ; flags interval ; }`;
  const t = s.kind === "addr"
    ? `type ${s.family === 4 ? "ipv4_addr" : "ipv6_addr"} ; flags interval ;`
    : `type ${s.family === 4 ? "ipv4_addr" : "ipv6_addr"} . inet_service ;`;
  return `add set ${T} ${name} { ${t} }`;
}

function elements(verb: "add" | "delete", what: string, els: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < els.length; i += 1000) {
    out.push(`${verb} element ${T} ${what} { ${els.slice(i, i + 1000).join(", ")} }`);
  }
  return out;
}

function mapEls(m: Map<string, string>): string[] {
  return [...m.entries()].sort(([a], [b]) => a < b ? -1 : 1).map(([k, c]) => `${k} : goto ${c}`);
}

/** The whole table as one transaction that replaces whatever table of ours is there. */
export function fullScript(plan: Plan): string {
  const out = [`add table ${T}`, `delete table ${T}`, `add table ${T} { comment "flanctl NetworkPolicy" ; }`];
  for (const [name, s] of plan.sets) out.push(setDecl(name, s), ...elements("add", name, s.elements));
  for (const m of MAPS) {
    out.push(`add map ${T} ${m} { type ${m.endsWith("4") ? "ipv4_addr" : "ipv6_addr"} : verdict ; }`);
  }
  // The chains as one block in nft's own syntax: one command for the lot instead of one `add rule` each
  // (libnftables parses and evaluates it in ~10% less CPU; docs/networkpolicy.md, "Performance").
  out.push(`table ${T} {`);
  for (const [name, c] of plan.chains) out.push(chainBlock(name, chainLines(c)));
  out.push("}");
  for (const m of MAPS) out.push(...elements("add", m, mapEls(plan.maps[m])));
  const d = dispatchLines(plan);
  out.push(`table ${T} {`, chainBlock("egress", d.egress), chainBlock("ingress", d.ingress));
  out.push(
    chainBlock("forward", [
      "type filter hook forward priority filter ; policy accept ;",
      "ct state established,related accept",
      "jump egress",
      "jump ingress",
    ]),
    "}",
  );
  return out.join("\n") + "\n";
}

/** A chain and its rules as a block of a `table { … }` command (one line per rule). */
function chainBlock(name: string, lines: readonly string[]): string {
  return `\tchain ${name} {\n${lines.map((l) => `\t\t${l}\n`).join("")}\t}`;
}

function same(a: readonly string[], b: readonly string[]): boolean {
  return a === b || a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The one transaction that turns the table of `old` into that of `now` ("" when nothing differs). */
export function diffScript(old: Plan, now: Plan): string {
  const out: string[] = [];
  const later: string[] = [];
  for (const [name, s] of now.sets) {
    const o = old.sets.get(name);
    if (!o || o.kind !== s.kind || o.family !== s.family) {
      if (o) throw new Error(`set ${name} changed type`); // names carry the family and kind: cannot happen
      out.push(setDecl(name, s), ...elements("add", name, s.elements));
      continue;
    }
    const had = new Set(o.elements), has = new Set(s.elements);
    out.push(...elements("delete", name, o.elements.filter((e) => !has.has(e))));
    out.push(...elements("add", name, s.elements.filter((e) => !had.has(e))));
  }
  for (const [name, c] of now.chains) {
    const o = old.chains.get(name);
    const lines = chainLines(c);
    if (o && same(chainLines(o), lines)) continue;
    out.push(o ? `flush chain ${T} ${name}` : `add chain ${T} ${name}`);
    out.push(...lines.map((l) => `add rule ${T} ${name} ${l}`));
  }
  for (const m of MAPS) {
    const o = old.maps[m], n = now.maps[m];
    const del = [...o.keys()].filter((k) => n.get(k) !== o.get(k)).sort();
    out.push(...elements("delete", m, del));
    const add = new Map([...n.entries()].filter(([k, c]) => o.get(k) !== c));
    out.push(...elements("add", m, mapEls(add)));
  }
  const od = dispatchLines(old), nd = dispatchLines(now);
  for (const dir of ["egress", "ingress"] as const) {
    if (same(od[dir], nd[dir])) continue;
    out.push(`flush chain ${T} ${dir}`, ...nd[dir].map((l) => `add rule ${T} ${dir} ${l}`));
  }
  for (const name of old.chains.keys()) {
    if (!now.chains.has(name)) out.push(`flush chain ${T} ${name}`), later.push(`delete chain ${T} ${name}`);
  }
  for (const name of old.sets.keys()) {
    if (!now.sets.has(name) && !(FIXED_SETS as readonly string[]).includes(name)) {
      later.push(`delete set ${T} ${name}`);
    }
  }
  out.push(...later);
  return out.length ? out.join("\n") + "\n" : "";
}
