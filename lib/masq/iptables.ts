/**
 * Installs and keeps flannel's rules with `iptables-restore --noflush`. As flanneld, a resync checks that
 * each of our rules exists (rules carry flannel's comment; anything else in a FLANNEL-* chain is someone
 * else's and is never flushed or deleted); when one is missing or stale, our rules are deleted and
 * appended again in one atomic iptables-restore, and the jump from the built-in chain is added only when
 * it is missing.
 * @module
 */
import { FlanctlError } from "../errors.ts";
import { type TableRules, versionHasRandomFully } from "./rules.ts";

/** iptables is missing or refused our rules. */
export class IptablesError extends FlanctlError {
  constructor(message: string) {
    super(message, 1);
  }
}

/** Runs a command, returning exit code and output. */
export type Runner = (
  cmd: string[],
  stdin?: string,
) => Promise<{ code: number; stdout: string; stderr: string }>;

/** The default runner (Deno.Command). */
export const denoRunner: Runner = async (cmd, stdin) => {
  let p: Deno.ChildProcess;
  try {
    p = new Deno.Command(cmd[0], {
      args: cmd.slice(1),
      stdin: stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new IptablesError(
        `${cmd[0]} not found: install the iptables package (needed for --ip-masq and forward rules)`,
      );
    }
    throw e;
  }
  if (stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const o = await p.output();
  const d = new TextDecoder();
  return { code: o.code, stdout: d.decode(o.stdout), stderr: d.decode(o.stderr) };
};

/** Whether this host's iptables supports MASQUERADE `--random-fully` (`iptables --version` ≥ 1.6.2). */
export async function supportsRandomFully(run: Runner = denoRunner, iptables = "iptables"): Promise<boolean> {
  const r = await run([iptables, "--version"]);
  return r.code === 0 && versionHasRandomFully(r.stdout);
}

/** State of one table's rules as found in iptables-save output. */
export interface TableState {
  /** Our chain's rules, in order. */
  rules: string[];
  /** How many times the jump rule appears. */
  jumps: number;
  chainExists: boolean;
}

/** Extracts our chain's state from `iptables-save -t TABLE` output. */
export function parseSave(text: string, t: TableRules): TableState {
  const st: TableState = { rules: [], jumps: 0, chainExists: false };
  let inTable = false;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("*")) inTable = line === `*${t.table}`;
    if (!inTable) continue;
    if (line.startsWith(`:${t.chain} `)) st.chainExists = true;
    else if (line.startsWith(`-A ${t.chain} `)) st.rules.push(line);
    else if (line === t.jump) st.jumps++;
  }
  return st;
}

/** The `--comment "…"` that marks the rules of `t` as flannel's (taken from its jump rule). */
function ownComment(t: TableRules): string {
  return /-m comment --comment "[^"]*"/.exec(t.jump)?.[0] ?? "\0";
}

/** Rules of our chain that are flannel's (they carry its comment); the others were added by someone else. */
export function ownRules(st: TableState, t: TableRules): string[] {
  const c = ownComment(t);
  return st.rules.filter((r) => r.includes(c));
}

/**
 * True when our rules are in place, as flanneld checks it: the jump exists and our chain holds each of
 * our rules (in our order) and no stale rule of ours (an old subnet's). Rules someone else added to the
 * chain do not matter.
 */
export function tableOk(st: TableState, t: TableRules): boolean {
  const own = ownRules(st, t);
  return st.chainExists && st.jumps >= 1 && own.length === t.rules.length &&
    own.every((r, i) => r === t.rules[i]);
}

/**
 * The iptables-restore --noflush input that brings one table from `st` to the wanted rules: as flanneld,
 * our rules present are deleted and all are appended again; the chain is declared (which would flush it)
 * only when it does not exist, so rules someone else put in it stay.
 */
export function restoreInput(t: TableRules, st: TableState): string {
  const lines = [`*${t.table}`];
  if (!st.chainExists) lines.push(`:${t.chain} - [0:0]`);
  if (st.jumps === 0) lines.push(t.jump);
  for (let i = 1; i < st.jumps; i++) lines.push(t.jump.replace(/^-A /, "-D "));
  for (const r of ownRules(st, t)) lines.push(r.replace(/^-A /, "-D "));
  lines.push(...t.rules, "COMMIT");
  return lines.join("\n") + "\n";
}

/** Keeps a set of tables' rules in place. */
export class RuleManager {
  #tables: TableRules[];
  readonly #run: Runner;
  readonly #save: string;
  readonly #restore: string;

  constructor(tables: TableRules[], opts: { run?: Runner; save?: string; restore?: string } = {}) {
    this.#tables = tables;
    this.#run = opts.run ?? denoRunner;
    this.#save = opts.save ?? "iptables-save";
    this.#restore = opts.restore ?? "iptables-restore";
  }

  /** Replaces the wanted rules (our subnet changed); the next ensure applies them. */
  setTables(tables: TableRules[]): void {
    this.#tables = tables;
  }

  /** True when there is nothing to manage. */
  get empty(): boolean {
    return this.#tables.length === 0;
  }

  async #state(t: TableRules): Promise<TableState> {
    const r = await this.#run([this.#save, "-t", t.table]);
    if (r.code !== 0) throw new IptablesError(`${this.#save} -t ${t.table} failed: ${r.stderr.trim()}`);
    return parseSave(r.stdout, t);
  }

  /** Throws {@link IptablesError} when the iptables tools cannot run. */
  async probe(): Promise<void> {
    if (this.empty) return;
    await this.#state(this.#tables[0]);
  }

  /**
   * Checks every table and re-applies those that differ. Returns the tables re-applied (empty: all fine).
   */
  async ensure(): Promise<string[]> {
    const fixed: string[] = [];
    let input = "";
    for (const t of this.#tables) {
      const st = await this.#state(t);
      if (tableOk(st, t)) continue;
      input += restoreInput(t, st);
      fixed.push(t.table);
    }
    if (!input) return fixed;
    const r = await this.#run([this.#restore, "-w", "5", "--noflush"], input);
    if (r.code !== 0) {
      throw new IptablesError(`${this.#restore} --noflush failed: ${r.stderr.trim() || `exit ${r.code}`}`);
    }
    return fixed;
  }
}
