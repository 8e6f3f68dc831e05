/**
 * Shared pieces of the `flanctl lab trace` tests: the JSON report's shape, the daemon flags that keep
 * resyncs from repairing an induced fault first, running `lab trace -o json`, and asserting where a trace
 * breaks.
 * @module
 */
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl } from "./netns.ts";

/** One hop of the trace report. */
export interface Hop {
  node: string;
  step: string;
  ok: boolean;
  entry: string;
  detail: string;
  lease?: string;
}

/** The trace report (`-o json`). */
export interface Trace {
  ok: boolean;
  src: string;
  dst: string;
  hops: Hop[];
  brokenAt?: number;
  why?: string;
  fix?: string[];
}

/** Daemon flags that slow the resyncs down, so they do not repair a fault before it is traced. */
export const SLOW = ["--daemon-arg=--resync-interval=3600", "--daemon-arg=--iptables-resync=3600"];

/** Runs `flanctl lab trace -o json [extra…] SRC DST`; the exit code must be 0 for ok, 1 for broken. */
export async function labTrace(name: string, src: string, dst: string, ...extra: string[]): Promise<Trace> {
  const r = await flanctl(["lab", "trace", "--name", name, "-o", "json", ...extra, src, dst]);
  assert(r.code === 0 || r.code === 1, `lab trace exit ${r.code}: ${r.stderr}`);
  const t = JSON.parse(r.stdout) as Trace;
  assertEquals(r.code, t.ok ? 0 : 1);
  return t;
}

/** Asserts the trace breaks first at `step` on `node`, with `entry` in that hop's entry. */
export function brokenAt(t: Trace, node: string, step: string, entry: string): Hop {
  assert(!t.ok && t.brokenAt !== undefined, `expected a broken trace:\n${JSON.stringify(t, null, 2)}`);
  const h = t.hops[t.brokenAt];
  assertEquals([h.node, h.step], [node, step], JSON.stringify(t, null, 2));
  assertStringIncludes(h.entry, entry);
  assert(t.hops.slice(0, t.brokenAt).every((x) => x.ok), "hops before the broken one are ok");
  assert(t.why && t.why.length > 10, "a broken trace says why");
  return h;
}
