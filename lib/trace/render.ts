/**
 * Output of `flanctl trace`: a verdict line, one block per hop (entry, detail, lease), and for a broken
 * path the why and fix of its first broken hop. `-o json` is the {@link TraceJson} view, nothing else.
 * @module
 */
import type { TraceJson, TraceReport } from "./types.ts";
import { escapeControl } from "../base/ui/table.ts";

/** The `-o json` view: exactly ok, src, dst, hops (node, step, ok, entry, detail, lease?), brokenAt?, why?, fix?. */
export function traceJson(r: TraceReport): TraceJson {
  const v: TraceJson = {
    ok: r.ok,
    src: r.src,
    dst: r.dst,
    hops: r.hops.map((h) => ({
      node: h.node,
      step: h.step,
      ok: h.ok,
      entry: h.entry,
      detail: h.detail,
      ...(h.lease !== undefined ? { lease: h.lease } : {}),
    })),
  };
  if (r.brokenAt !== undefined) {
    v.brokenAt = r.brokenAt;
    v.why = r.why;
    v.fix = r.fix ?? [];
  }
  return v;
}

/** Human-readable trace. */
export function renderTrace(r: TraceReport): string {
  const b = r.brokenAt !== undefined ? r.hops[r.brokenAt] : null;
  const out = [
    b
      ? `TRACE ${r.src} → ${r.dst}: BROKEN at hop ${r.brokenAt! + 1} (${b.step} on ${b.node})`
      : `TRACE ${r.src} → ${r.dst}: OK (${r.hops.length} hops)`,
    "",
  ];
  const nw = Math.max(4, ...r.hops.map((h) => h.node.length));
  const sw = Math.max(4, ...r.hops.map((h) => h.step.length));
  r.hops.forEach((h, i) => {
    const n = String(i + 1).padStart(2);
    out.push(
      `${n}  ${(h.ok ? "ok" : "FAIL").padEnd(4)}  ${h.node.padEnd(nw)}  ${h.step.padEnd(sw)}  ${h.entry}`,
    );
    const pad = " ".repeat(2 + 2 + 4 + 2 + nw + 2 + sw + 2);
    out.push(`${pad}${h.detail}`);
    if (h.lease) out.push(`${pad}lease ${h.lease}`);
  });
  if (b) {
    out.push("", `why:  ${r.why ?? b.detail}`);
    (r.fix ?? []).forEach((f, i) => out.push(`${i === 0 ? "fix: " : "     "} ${f}`));
  }
  if (r.probe) out.push("", `probe: ${r.probe}`);
  return escapeControl(out.join("\n")) + "\n";
}
