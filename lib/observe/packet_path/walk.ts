/**
 * The walk: a packet through the base chains of each hook, as the kernel runs them — every base chain on
 * the hook (iptables-legacy's, iptables-nft's, each native nft table's) in priority order; an ACCEPT ends
 * one base chain only, the next base chain on the hook still sees the packet; a DROP (REJECT, a queue to
 * userspace) anywhere is final. Jumps and gotos enter sub-chains, RETURN and a sub-chain's end come back,
 * a base chain's end is its policy. NAT chains are run until one picks a NAT for the connection. A match
 * the evaluator cannot decide forks the walk (matched / not matched): when both ends agree the verdict
 * stands, otherwise it is "unknown match: <text>". Bounded: {@link MAX_DEPTH} nested jumps,
 * {@link MAX_STEPS} rules a chain, {@link MAX_WORLDS} forks a path.
 * @module
 */
import type {
  Action,
  Chain,
  Hook,
  Packet,
  PathVerdict,
  Rule,
  RuleRef,
  Step,
  StepVerdict,
  Table,
} from "./types.ts";
import { evalMatches, type WalkState } from "./match.ts";

/** Most nested jumps followed (the kernel refuses loops; the text may not). */
export const MAX_DEPTH = 64;
/** Most rules looked at in one base chain's walk. */
export const MAX_STEPS = 100_000;
/** Most forks (undecidable matches) followed along one path. */
export const MAX_WORLDS = 32;

/** One possible course of the packet: its state, the matches assumed, the steps so far. */
interface World extends WalkState {
  assumed: string[];
  steps: Step[];
  natHooks: Set<Hook>;
  end: "drop" | "unknown" | null;
  reason: string | null;
}

interface Frame {
  chain: Chain;
  idx: number;
}

/** One base chain's outcome in one world. */
interface Outcome {
  verdict: StepVerdict;
  rule: RuleRef | null;
  via: string[];
  state: WalkState;
  assumed: string[];
  note?: string;
}

function ref(t: Table, chain: Chain, idx: number, rule: Rule): RuleRef {
  return {
    backend: t.backend,
    family: t.family,
    table: t.name,
    chain: chain.name,
    position: idx + 1,
    text: rule.text,
    handle: rule.handle,
  };
}

function applyMark(s: WalkState, a: Extract<Action, { kind: "mark" }>): void {
  const m = s.mark >>> 0;
  if (a.op === "set") s.mark = ((m & ~a.mask) ^ a.value) >>> 0;
  else if (a.op === "xor") s.mark = (m ^ a.value) >>> 0;
  else if (a.op === "or") s.mark = (m | a.value) >>> 0;
  else s.mark = (m & a.value) >>> 0;
}

/** Runs one base chain for `p`; several outcomes when undecidable matches fork it. */
export function runBaseChain(
  t: Table,
  base: Chain,
  p: Packet,
  start: WalkState,
  assumed: string[],
): Outcome[] {
  interface Run {
    frames: Frame[];
    state: WalkState;
    assumed: string[];
    via: string[];
  }
  const out: Outcome[] = [];
  const work: Run[] = [{
    frames: [{ chain: base, idx: 0 }],
    state: { ...start },
    assumed: [...assumed],
    via: [base.name],
  }];
  let steps = 0;
  while (work.length) {
    const r = work.pop()!;
    const end = (o: Omit<Outcome, "state" | "assumed" | "via">) =>
      out.push({ ...o, state: r.state, assumed: r.assumed, via: [...r.via] });
    for (;;) {
      if (++steps > MAX_STEPS) {
        end({ verdict: "unknown", rule: null, note: `more than ${MAX_STEPS} rules walked in ${base.name}` });
        break;
      }
      const top = r.frames[r.frames.length - 1];
      if (top.idx >= top.chain.rules.length) {
        r.frames.pop();
        if (!r.frames.length) {
          end({ verdict: base.policy === "drop" ? "drop" : "accept", rule: null });
          break;
        }
        r.via.pop();
        continue;
      }
      const idx = top.idx++;
      const rule = top.chain.rules[idx];
      const m = evalMatches(rule.matches, p, r.state);
      if (m.hit === false) continue;
      if (m.hit === "unknown") {
        if (out.length + work.length >= MAX_WORLDS) {
          end({
            verdict: "unknown",
            rule: ref(t, top.chain, idx, rule),
            note: `unknown match: ${m.unknown}`,
          });
          break;
        }
        work.push({
          frames: r.frames.map((f) => ({ ...f })),
          state: { ...r.state },
          assumed: [...r.assumed, m.unknown!],
          via: [...r.via],
        });
        r.assumed = [...r.assumed, m.unknown!];
      }
      for (const e of rule.effects) {
        if (e.kind === "mark") applyMark(r.state, e);
        if (e.kind === "notrack") r.state.untracked = true;
      }
      let action = rule.action;
      if (action.kind === "vmap") {
        let chosen: Action | null = { kind: "continue" };
        for (const e of action.entries) {
          const v = evalMatches(e.matches, p, r.state);
          if (v.hit === true) {
            chosen = e.action;
            break;
          }
          if (v.hit === "unknown") {
            chosen = null;
            end({
              verdict: "unknown",
              rule: ref(t, top.chain, idx, rule),
              note: `unknown match: ${v.unknown}`,
            });
            break;
          }
        }
        if (!chosen) break;
        action = chosen;
      }
      const here = () => ref(t, top.chain, idx, rule);
      switch (action.kind) {
        case "continue":
          continue;
        case "mark":
          applyMark(r.state, action);
          continue;
        case "notrack":
          r.state.untracked = true;
          continue;
        case "accept":
        case "drop":
        case "reject":
        case "queue":
          end({ verdict: action.kind, rule: here() });
          break;
        case "nat":
          if (action.how === "dnat" || action.how === "redirect" || action.how === "netmap") {
            r.state.dnat = true;
          } else r.state.snat = true;
          end({ verdict: "nat", rule: here(), note: action.how });
          break;
        case "return":
          r.frames.pop();
          if (!r.frames.length) {
            end({ verdict: base.policy === "drop" ? "drop" : "accept", rule: null });
            break;
          }
          r.via.pop();
          continue;
        case "jump":
        case "goto": {
          const next = t.chains.get(action.chain);
          if (!next || r.frames.length >= MAX_DEPTH) {
            end({
              verdict: "unknown",
              rule: here(),
              note: `cannot follow ${action.kind} to ${action.chain}`,
            });
            break;
          }
          if (action.kind === "goto" && r.frames.length > 1) {
            r.frames.pop();
            r.via.pop();
          } else if (action.kind === "goto") {
            // A goto from the base chain: its end is the base chain's policy.
            r.frames[0].idx = r.frames[0].chain.rules.length;
          }
          r.frames.push({ chain: next, idx: 0 });
          r.via.push(next.name);
          continue;
        }
        case "unknown":
          end({ verdict: "unknown", rule: here(), note: `unknown target: ${action.text}` });
          break;
      }
      break;
    }
  }
  return out;
}

/** The base chains of `tables` a packet of family `p.family` meets at `hook`, in the kernel's order. */
export function baseChains(tables: Table[], p: Packet, hook: Hook): { table: Table; chain: Chain }[] {
  const fams = p.family === 4 ? ["ip", "inet"] : ["ip6", "inet"];
  const out: { table: Table; chain: Chain; order: number }[] = [];
  let order = 0;
  for (const table of tables) {
    const netdev = table.family === "netdev";
    if (!fams.includes(table.family) && !netdev) continue;
    for (const chain of table.chains.values()) {
      if (chain.hook !== hook) continue;
      if ((hook === "ingress" || netdev) && chain.device !== p.iif) continue;
      out.push({ table, chain, order: order++ });
    }
  }
  // Equal priorities run in the order they were registered, which the listings do not say: kept stable.
  out.sort((a, b) => a.chain.priority - b.chain.priority || a.order - b.order);
  return out;
}

/** Pushes one base chain's outcomes into the worlds that reach it. */
function crossChain(
  worlds: World[],
  hook: Hook,
  table: Table,
  chain: Chain,
  p: (h: Hook) => Packet,
): World[] {
  const next: World[] = [];
  for (const w of worlds) {
    if (w.end) {
      next.push(w);
      continue;
    }
    const stepOf = (verdict: StepVerdict, rule: RuleRef | null, via: string[], note?: string): Step => ({
      hook,
      backend: table.backend,
      family: table.family,
      table: table.name,
      chain: chain.name,
      priority: chain.priority,
      verdict,
      rule,
      via,
      ...(note ? { note } : {}),
    });
    if (chain.type === "nat" && (w.natHooks.has(hook) || w.untracked)) {
      const why = w.untracked ? "the packet is untracked: no NAT" : "a NAT chain before it chose the NAT";
      next.push({ ...w, steps: [...w.steps, stepOf("skipped", null, [], why)] });
      continue;
    }
    for (const o of runBaseChain(table, chain, p(hook), w, w.assumed)) {
      const step = stepOf(o.verdict, o.rule, o.via, o.note);
      const nw: World = {
        ...w,
        ...o.state,
        assumed: o.assumed,
        steps: [...w.steps, step],
        natHooks: new Set(w.natHooks),
      };
      if (o.verdict === "nat") nw.natHooks.add(hook);
      if (o.verdict === "drop" || o.verdict === "reject" || o.verdict === "queue") nw.end = "drop";
      if (o.verdict === "unknown") [nw.end, nw.reason] = ["unknown", o.note ?? "unknown"];
      next.push(nw);
    }
  }
  if (next.length > MAX_WORLDS) {
    return [{
      ...next[0],
      end: "unknown",
      reason: `more than ${MAX_WORLDS} undecidable matches on the path`,
    }];
  }
  return next;
}

/**
 * Walks `p` through `hooks` in order over every table of `tables`. `at` gives the packet as each hook
 * sees it (its interfaces differ: INPUT has no output interface); by default `p` itself.
 */
export function walkPath(
  tables: Table[],
  p: Packet,
  hooks: Hook[],
  at: (h: Hook) => Packet = () => p,
): PathVerdict {
  let worlds: World[] = [{
    mark: 0,
    dnat: false,
    snat: false,
    untracked: false,
    assumed: [],
    steps: [],
    natHooks: new Set(),
    end: null,
    reason: null,
  }];
  for (const hook of hooks) {
    for (const { table, chain } of baseChains(tables, at(hook), hook)) {
      worlds = crossChain(worlds, hook, table, chain, at);
    }
  }
  const cls = (w: World) => w.end ?? "pass";
  const base = worlds.find((w) => w.assumed.length === 0) ?? worlds[0];
  const same = worlds.every((w) => cls(w) === cls(base));
  const last = base.steps[base.steps.length - 1];
  const dropped = base.end === "drop" ? last : null;
  const nat = base.steps.find((s) => s.verdict === "nat") ?? null;
  if (!same || base.end === "unknown") {
    const w = base.end === "unknown" ? base : worlds.find((x) => cls(x) !== cls(base))!;
    const reason = w.end === "unknown" ? w.reason : `unknown match: ${w.assumed[w.assumed.length - 1]}`;
    return { verdict: "unknown", steps: base.steps, dropped, reason, nat };
  }
  return { verdict: base.end === "drop" ? "drop" : "pass", steps: base.steps, dropped, reason: null, nat };
}
