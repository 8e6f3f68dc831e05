/**
 * The daemon's start-up as a list of named steps (lib/daemon/steps.ts): {@link bootstrap} runs them and
 * returns the finished {@link NodeContext}. When a step fails, the steps done are undone in reverse order
 * (each undoes only what flanneld would not leave behind: see lib/daemon/steps.ts), and one logfmt line
 * says what happened — `msg="daemon start-up failed" step=<name> undone=<names> left=<names> error=…` —
 * before the {@link StepError} (its `cause` the step's own error) is thrown.
 * @module
 */
import { runSteps, type Step, StepError } from "../base/steps.ts";
import type { NodeBase, NodeContext } from "./context.ts";
import { Draft, NODE_STEPS } from "./steps.ts";
import { errText } from "../base/errors.ts";

/**
 * Runs `first` (the caller's own steps, e.g. the health server) and then the node's steps against `base`;
 * returns the node context. Throws a {@link StepError} naming the failed step (logged; stopped by
 * `base.signal` it is logged as an interrupted start-up, not a failure).
 */
export async function bootstrap(
  base: NodeBase,
  first: readonly Step<Draft>[] = [],
  steps: readonly Step<Draft>[] = NODE_STEPS,
): Promise<NodeContext> {
  const d = new Draft(base);
  try {
    await runSteps([...first, ...steps], d);
  } catch (e) {
    if (!(e instanceof StepError)) throw e;
    const fields = {
      step: e.step,
      undone: e.undone.join(","),
      left: e.left.join(","),
      error: errText(e.cause),
    };
    if (base.signal.aborted) base.log.info("daemon start-up stopped", fields);
    else base.log.error("daemon start-up failed", fields);
    for (const u of e.undoErrors) base.log.warn("undo failed", { step: u.step, error: errText(u.error) });
    throw e;
  }
  return d.freeze();
}
