/**
 * The one iptables driver: every iptables change flanctl makes (the daemon's masquerade and forward
 * chains, the bridge plugin's ipMasq chains, portmap's chains) is one `iptables-restore --noflush -w`
 * transaction per family, and every read one `iptables-save -t TABLE`. Rules are data: a chain with its
 * rules in iptables-save form and the jump into it. A resync checks, as flanneld, that each of our rules
 * exists; a repair deletes ours and appends them again, declaring a chain (which flushes it) only when it
 * does not exist, so rules someone else put into one of our chains are never flushed.
 * @module
 */
import { type Family, FirewallError, type Runner } from "./types.ts";
import { denoRunner } from "./types.ts";

/** One chain we own: its rules and the jump from a built-in (or parent) chain, in iptables-save form. */
export interface ChainRules {
  /** IP family (default 4: iptables; 6: ip6tables). */
  family?: Family;
  table: string;
  chain: string;
  /** The chain that jumps to `chain`. */
  parent: string;
  /** The jump rule (`-A PARENT … -j CHAIN`). */
  jump: string;
  rules: string[];
}

/** State of one chain as found in iptables-save output. */
export interface ChainState {
  /** Our chain's rules, in order. */
  rules: string[];
  /** How many times the jump rule appears. */
  jumps: number;
  chainExists: boolean;
}

/** The save/restore tool names of a family. */
export function tools(family: Family): { save: string; restore: string } {
  return family === 6
    ? { save: "ip6tables-save", restore: "ip6tables-restore" }
    : { save: "iptables-save", restore: "iptables-restore" };
}

/** Splits iptables-save output into tables: name → lines (without the `*table` and COMMIT lines). */
export function splitSave(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let cur: string[] | null = null;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("*")) {
      cur = [];
      out.set(line.slice(1), cur);
    } else if (line === "COMMIT") cur = null;
    else if (cur && line && !line.startsWith("#")) cur.push(line);
  }
  return out;
}

/** Extracts our chain's state from `iptables-save -t TABLE` output. */
export function parseSave(text: string, t: ChainRules): ChainState {
  const st: ChainState = { rules: [], jumps: 0, chainExists: false };
  for (const line of splitSave(text).get(t.table) ?? []) {
    if (line.startsWith(`:${t.chain} `)) st.chainExists = true;
    else if (line.startsWith(`-A ${t.chain} `)) st.rules.push(line);
    else if (line === t.jump) st.jumps++;
  }
  return st;
}

/** The `--comment "…"` that marks the rules of `t` as ours (taken from its jump rule), or null. */
function ownComment(t: ChainRules): string | null {
  return /-m comment --comment "[^"]*"/.exec(t.jump)?.[0] ?? null;
}

/**
 * Rules of our chain that are ours: with a comment on the jump (flannel's chains), the rules carrying it;
 * the others were added by someone else. Without one, every rule of the chain.
 */
export function ownRules(st: ChainState, t: ChainRules): string[] {
  const c = ownComment(t);
  return c === null ? st.rules : st.rules.filter((r) => r.includes(c));
}

/**
 * True when our rules are in place, as flanneld checks it: the jump exists and the chain holds each of our
 * rules (in our order) and no stale rule of ours (an old subnet's). Rules someone else added to a chain
 * whose rules carry a comment (FLANNEL-*) do not matter.
 */
export function chainOk(st: ChainState, t: ChainRules): boolean {
  const own = ownRules(st, t);
  return st.chainExists && st.jumps >= 1 && own.length === t.rules.length &&
    own.every((r, i) => r === t.rules[i]);
}

/**
 * The restore lines (inside `*table`…COMMIT) that bring one chain from `st` to the wanted rules: as flanneld,
 * our rules present are deleted and all are appended again; the chain is declared (which flushes it) only
 * when it does not exist, so rules someone else put in it stay.
 */
export function chainInput(t: ChainRules, st: ChainState): string[] {
  const lines: string[] = [];
  if (!st.chainExists) lines.push(`:${t.chain} - [0:0]`);
  if (st.jumps === 0) lines.push(t.jump);
  for (let i = 1; i < st.jumps; i++) lines.push(t.jump.replace(/^-A /, "-D "));
  for (const r of ownRules(st, t)) lines.push(r.replace(/^-A /, "-D "));
  lines.push(...t.rules);
  return lines;
}

/**
 * True when `iptables --version` (text) is 1.6.2 or newer, the first release with MASQUERADE
 * `--random-fully` (the check flanneld's iptables library makes).
 */
export function versionHasRandomFully(versionText: string): boolean {
  const m = /v(\d+)\.(\d+)\.(\d+)/.exec(versionText);
  if (!m) return false;
  const [a, b, c] = m.slice(1).map(Number);
  return a > 1 || (a === 1 && (b > 6 || (b === 6 && c >= 2)));
}

/** Whether this host's iptables supports MASQUERADE `--random-fully` (`iptables --version` >= 1.6.2). */
export async function supportsRandomFully(run: Runner = denoRunner, iptables = "iptables"): Promise<boolean> {
  const r = await run([iptables, "--version"]);
  return r.code === 0 && versionHasRandomFully(r.stdout);
}

/** Joins per-table restore lines into one iptables-restore input (one transaction). */
export function restoreText(byTable: Map<string, string[]>): string {
  let s = "";
  for (const [table, lines] of byTable) {
    if (lines.length) s += `*${table}\n${lines.join("\n")}\nCOMMIT\n`;
  }
  return s;
}

/**
 * The restore lines that remove `chains` of one table's saved lines: every rule jumping to them (in any
 * chain), then flush and delete. Chains that are not there are skipped. Returns [] when there is nothing.
 */
export function removeChainLines(lines: string[], chains: Iterable<string>): string[] {
  const want = new Set(chains);
  const present = new Set<string>();
  const out: string[] = [];
  for (const l of lines) {
    if (l.startsWith(":")) {
      const name = l.slice(1).split(" ")[0];
      if (want.has(name)) present.add(name);
    }
  }
  for (const l of lines) {
    if (!l.startsWith("-A ")) continue;
    const m = / -[jg] (\S+)(?: |$)/.exec(l);
    if (m && present.has(m[1]) && !present.has(l.split(" ")[1])) out.push("-D " + l.slice(3));
  }
  for (const c of present) out.push(`-F ${c}`);
  for (const c of present) out.push(`-X ${c}`);
  return out;
}

/** iptables (or ip6tables) for one family, through save/restore. */
export class Iptables {
  readonly family: Family;
  readonly #run: Runner;
  readonly #save: string;
  readonly #restore: string;

  constructor(family: Family = 4, opts: { run?: Runner; save?: string; restore?: string } = {}) {
    this.family = family;
    this.#run = opts.run ?? denoRunner;
    this.#save = opts.save ?? tools(family).save;
    this.#restore = opts.restore ?? tools(family).restore;
  }

  /** `iptables-save -t table` output. Throws FirewallError. */
  async save(table: string): Promise<string> {
    const r = await this.#run([this.#save, "-t", table]);
    if (r.code !== 0) {
      throw new FirewallError(this.#save, `${this.#save} -t ${table} failed: ${r.stderr.trim() || r.code}`);
    }
    return r.stdout;
  }

  /** Applies restore input as one transaction (`--noflush`, waiting 5 s for the xtables lock). */
  async restore(text: string): Promise<void> {
    if (!text) return;
    const r = await this.#run([this.#restore, "-w", "5", "--noflush"], text);
    if (r.code !== 0) {
      throw new FirewallError(
        this.#restore,
        `${this.#restore} --noflush failed: ${r.stderr.trim() || `exit ${r.code}`}`,
      );
    }
  }

  /** Removes `chains` of `table` and every jump to them, in one transaction. Returns the chains removed. */
  async removeChains(table: string, chains: string[]): Promise<string[]> {
    const lines = splitSave(await this.save(table)).get(table) ?? [];
    const del = removeChainLines(lines, chains);
    if (!del.length) return [];
    await this.restore(restoreText(new Map([[table, del]])));
    return del.filter((l) => l.startsWith("-X ")).map((l) => l.slice(3));
  }
}

/** Keeps a set of chains in place, one restore transaction per family for the chains that drifted. */
export class RuleManager {
  #tables: ChainRules[];
  readonly #ipt: Record<Family, Iptables>;

  constructor(tables: ChainRules[], opts: { run?: Runner } = {}) {
    this.#tables = tables;
    this.#ipt = { 4: new Iptables(4, opts), 6: new Iptables(6, opts) };
  }

  /** Replaces the wanted rules (our subnet changed); the next ensure applies them. */
  setTables(tables: ChainRules[]): void {
    this.#tables = tables;
  }

  /** True when there is nothing to manage. */
  get empty(): boolean {
    return this.#tables.length === 0;
  }

  /** Throws {@link FirewallError} when the iptables tools cannot run. */
  async probe(): Promise<void> {
    for (const f of new Set(this.#tables.map((t) => t.family ?? 4))) {
      await this.#ipt[f].save(this.#tables.find((t) => (t.family ?? 4) === f)!.table);
    }
  }

  /** Checks every chain and re-applies those that differ. Returns "table" (v4) / "ip6:table" names fixed. */
  async ensure(): Promise<string[]> {
    const fixed: string[] = [];
    for (const f of [4, 6] as const) {
      const mine = this.#tables.filter((t) => (t.family ?? 4) === f);
      const saved = new Map<string, string>();
      const input = new Map<string, string[]>();
      for (const t of mine) {
        if (!saved.has(t.table)) saved.set(t.table, await this.#ipt[f].save(t.table));
        const st = parseSave(saved.get(t.table)!, t);
        if (chainOk(st, t)) continue;
        input.set(t.table, [...(input.get(t.table) ?? []), ...chainInput(t, st)]);
        fixed.push(f === 4 ? t.table : `ip6:${t.table}`);
      }
      await this.#ipt[f].restore(restoreText(input));
    }
    return fixed;
  }
}
