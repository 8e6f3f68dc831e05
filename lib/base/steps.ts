/**
 * A sequence of named steps, each able to take back what it made: {@link runSteps} runs them in order and,
 * when one fails, undoes the ones already done in reverse order, then throws a {@link StepError} naming the
 * failed step, what was undone and what was left. A leaf module (no imports), shared by the daemon's
 * start-up (lib/daemon/bootstrap.ts) and the bridge plugin's ADD (lib/cni/bridge.ts).
 *
 * The step that fails is not undone: a step whose `run` can fail after a change of its own cleans that up
 * before it throws (e.g. a device it created), so `undo` only ever sees a step that completed.
 * @module
 */
import { errText } from "./errors.ts";

/** One step of a sequence, run against a context `C` that the steps share. */
export interface Step<C> {
  /** A short name, without spaces (it is logged and reported). */
  readonly name: string;
  /** Does the step (throws on failure). */
  run(ctx: C): void | Promise<void>;
  /**
   * Takes back what `run` made when a later step fails. Absent: the step made nothing to take back, or what
   * it made is kept on purpose (the step's documentation says which).
   */
  undo?(ctx: C): void | Promise<void>;
}

/** An undo that failed itself (reported, never hiding the step's own error). */
export interface UndoFailure {
  step: string;
  error: unknown;
}

/** A step failed; the steps done before it were undone where they can be. `cause` is the step's error. */
export class StepError extends Error {
  /** The name of the step that failed. */
  readonly step: string;
  /** The steps done before it whose undo ran and succeeded, in the order they were undone. */
  readonly undone: readonly string[];
  /** The steps done before it whose effects stay: no undo (kept on purpose), or an undo that failed. */
  readonly left: readonly string[];
  /** The undos that failed (their steps are in {@link left} too). */
  readonly undoErrors: readonly UndoFailure[];

  constructor(step: string, cause: unknown, undone: string[], left: string[], undoErrors: UndoFailure[]) {
    super(`${step}: ${errText(cause)}`, { cause });
    this.name = "StepError";
    this.step = step;
    this.undone = undone;
    this.left = left;
    this.undoErrors = undoErrors;
  }
}

/** What undoing a list of done steps did. */
export interface UndoReport {
  undone: string[];
  left: string[];
  errors: UndoFailure[];
}

/** Undoes `done` (steps that completed, in the order they ran) in reverse order; never throws. */
export async function undoSteps<C>(done: readonly Step<C>[], ctx: C): Promise<UndoReport> {
  const r: UndoReport = { undone: [], left: [], errors: [] };
  for (const s of [...done].reverse()) {
    if (!s.undo) {
      r.left.push(s.name);
      continue;
    }
    try {
      await s.undo(ctx);
      r.undone.push(s.name);
    } catch (error) {
      r.left.push(s.name);
      r.errors.push({ step: s.name, error });
    }
  }
  r.left.reverse(); // in the order they ran
  return r;
}

/**
 * Runs `steps` in order against `ctx`. Returns the steps done (all of them). When one throws, the steps done
 * before it are undone in reverse order and a {@link StepError} is thrown with the step's error as `cause`.
 */
export async function runSteps<C>(steps: readonly Step<C>[], ctx: C): Promise<Step<C>[]> {
  const done: Step<C>[] = [];
  for (const s of steps) {
    try {
      await s.run(ctx);
    } catch (e) {
      const r = await undoSteps(done, ctx);
      throw new StepError(s.name, e, r.undone, r.left, r.errors);
    }
    done.push(s);
  }
  return done;
}
