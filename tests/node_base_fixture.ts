/**
 * A daemon NodeBase for unit tests of the daemon's steps: a real Logger (lines collected), metrics,
 * readiness and memory release; options, netlink handle and store are empty objects the test's own steps
 * or backends never touch.
 * @module
 */
import type { NodeBase } from "../lib/daemon/context.ts";
import { Logger } from "../lib/base/log.ts";
import { Metrics } from "../lib/daemon/metrics.ts";
import { MemoryRelease } from "../lib/daemon/memory.ts";
import { Readiness } from "../lib/daemon/readiness.ts";

/** The base: log lines go to `lines`; `o` is the options (partial), `signal` the daemon's stop signal. */
export function fakeNodeBase(
  lines: string[],
  o: Partial<NodeBase["o"]> = {},
  signal = new AbortController().signal,
): NodeBase {
  const log = new Logger({ sink: (l) => lines.push(l), time: false });
  const metrics = new Metrics();
  return {
    o: o as NodeBase["o"],
    nl: {} as NodeBase["nl"],
    store: {} as NodeBase["store"],
    log,
    notify: () => {},
    metrics,
    readiness: new Readiness(metrics, log),
    memory: new MemoryRelease({}, log),
    jitless: false,
    signal,
  };
}
