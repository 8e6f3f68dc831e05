/**
 * Shared pieces of the `flanctl lab trace` tests: the JSON report's shape, the daemon flags that keep
 * resyncs from repairing an induced fault first, running `lab trace -o json`, the hops of a whole
 * pod → pod path, and asserting where a trace breaks.
 * @module
 */
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl } from "./netns.ts";
import type { TraceHop, TraceJson } from "../lib/trace/types.ts";
import type { LabState } from "../lib/lab/types.ts";

/** One hop of the trace report. */
export type Hop = TraceHop;

/** The trace report (`-o json`). */
export type Trace = TraceJson;

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

/** Runs `lab trace -o json SRC DST` and asserts the path is whole. */
export async function wholeTrace(name: string, src: string, dst: string): Promise<Trace> {
  const t = await labTrace(name, src, dst);
  assert(t.ok, JSON.stringify(t, null, 2));
  return t;
}

/** The IPv6 address of the `i`th pod of the lab (asserted to be one). */
export function podIPv6(s: LabState, i: number): string {
  const ip = s.pods[i].ipv6!;
  assert(ip && ip.includes(":"), JSON.stringify(s.pods));
  return ip;
}

/** The `node:step` of each hop. */
export function steps(t: Trace): string[] {
  return t.hops.map((h) => `${h.node}:${h.step}`);
}

/**
 * The `node:step` hops of a whole path from node1-pod1 to node2-pod1: the pod and node1's own hops,
 * node1's `overlay` steps, the underlay, node2's daemon and `ingress` steps, its route to the pod.
 */
export function podToPodSteps(overlay: string[], ingress: string[]): string[] {
  return [
    "node1-pod1:pod-route",
    "node1:veth",
    "node1:cni0-port",
    "node1:daemon",
    "node1:host-route",
    "node1:forward",
    "node1:masquerade",
    ...overlay.map((s) => `node1:${s}`),
    "node1:underlay",
    "underlay:underlay-bridge",
    "node2:daemon",
    ...ingress.map((s) => `node2:${s}`),
    "node2:remote-route",
    "node2:remote-forward",
    "node2:cni0-port",
    "node2-pod1:pod",
  ];
}
