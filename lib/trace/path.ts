/**
 * The building blocks every trace walk (IPv4 and IPv6) shares: the {@link Path} of hops with the why of
 * each broken one, the doctor's text for a hop, and a route lookup as `ip route get` prints it.
 * @module
 */
import type { RouteLookup } from "../netlink/mod.ts";
import { ALL_CHECKS } from "../doctor/mod.ts";
import type { DoctorContext } from "../doctor/context.ts";
import type { PathDevice, TraceHop } from "./types.ts";

/** A broken hop's explanation. */
export interface Why {
  why: string;
  fix: string[];
  check?: string;
}

/** The why/fix of doctor check `id` on a node, when that check finds a problem there. */
export async function doctorText(ctx: DoctorContext, id: string): Promise<Why | null> {
  const c = ALL_CHECKS.find((c) => c.id === id);
  if (!c) return null;
  const f = (await c.run(ctx)).find((f) => f.severity === "critical" || f.severity === "warning");
  return f ? { why: f.why ?? f.detail, fix: f.fix ?? [], check: id } : null;
}

/** A route lookup's answer as `ip route get` prints it (or why the lookup failed). */
export function lookupText(r: RouteLookup): string {
  if (r.errno !== null) return `route lookup failed: ${r.error}`;
  const via = r.gateway ? ` via ${r.gateway}` : "";
  const dev = r.devName ? ` dev ${r.devName}` : "";
  const flags = r.flags.length ? ` ${r.flags.join(" ")}` : "";
  const table = r.table === 254 ? "main" : r.table === 255 ? "local" : String(r.table);
  return `${r.type === "unicast" ? "" : `${r.type} `}${r.route}${via}${dev}${flags} table ${table}`;
}

/** The hops so far and the why of each broken one. */
export class Path {
  readonly hops: TraceHop[] = [];
  /** Devices the packet passes, in order (for --probe's counters). */
  readonly devices: PathDevice[] = [];
  dev(netns: string | null, dev: string | null, dir: "rx" | "tx"): void {
    if (dev) this.devices.push({ netns, dev, dir });
  }
  readonly whys = new Map<number, Why>();
  add(h: TraceHop, why?: Why | null): void {
    if (h.lease === undefined) delete h.lease;
    this.hops.push(h);
    if (!h.ok) this.whys.set(this.hops.length - 1, why ?? { why: h.detail, fix: [] });
  }
  get broken(): boolean {
    return this.hops.some((h) => !h.ok);
  }
}
