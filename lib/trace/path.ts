/**
 * The building blocks every trace walk (IPv4 and IPv6) shares: what each step of a walk reads (the
 * {@link Walk}), the {@link Path} of hops with the why of each broken one, the report it ends in, the
 * doctor's text for a hop, and a route lookup as `ip route get` prints it.
 * @module
 */
import { IPAddr } from "../base/cidr.ts";
import { type RouteLookup, RT_TABLE_LOCAL, RT_TABLE_MAIN } from "../netlink/mod.ts";
import type { Lease } from "../store/types.ts";
import { ALL_CHECKS, type CheckId } from "../doctor/mod.ts";
import type { NodeSnapshot } from "../observe/snapshot.ts";
import {
  isPod,
  type PathDevice,
  type TraceHop,
  type TraceInput,
  type TraceNode,
  type TraceReport,
} from "./types.ts";

/** A broken hop's explanation. */
export interface Why {
  why: string;
  fix: string[];
  check?: CheckId;
}

/** The why/fix of doctor check `id` on a node, when that check finds a problem there. */
export async function doctorText(ctx: NodeSnapshot, id: CheckId): Promise<Why | null> {
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
  const table = r.table === RT_TABLE_MAIN ? "main" : r.table === RT_TABLE_LOCAL ? "local" : String(r.table);
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

/** The report of a walk that ends here: the first broken hop is the verdict, with its why and fix. */
export function finish(inp: TraceInput, src: string, p: Path): TraceReport {
  const { hops, whys } = p;
  const i = hops.findIndex((h) => !h.ok);
  const rep: TraceReport = { ok: i < 0, src, dst: inp.dstName, hops, devices: p.devices };
  if (i >= 0) {
    const w = whys.get(i)!;
    rep.brokenAt = i;
    rep.why = w.why;
    rep.fix = w.fix;
    if (w.check) rep.check = w.check;
  }
  return rep;
}

/** What every step of a walk reads: the packet, its source node, the lease of its destination. */
export interface Walk {
  inp: TraceInput;
  p: Path;
  /** The source node. */
  n: TraceNode;
  ctx: NodeSnapshot;
  dst: IPAddr;
  /** The packet's source address of the walk's family: the pod's, or the one given for a node. */
  srcIP: string | null;
  fromPod: boolean;
  /** The network's backend type (vxlan when unknown). */
  backend: string;
  /** The lease of the family that holds the destination. */
  lease: Lease | null;
  /** A lease as the hops name it. */
  text: (l: Lease) => string;
}

/** Starts a walk of `inp` with the family's source address, lease lookup and lease text. */
export function startWalk(
  inp: TraceInput,
  family: {
    srcIP: string | null;
    lease: (ctx: NodeSnapshot, dst: IPAddr) => Lease | null;
    text: (nodes: TraceNode[], l: Lease) => string;
  },
): Walk {
  const n = inp.src.node;
  const dst = IPAddr.parse(inp.dst, "DST");
  return {
    inp,
    p: new Path(),
    n,
    ctx: n.ctx,
    dst,
    srcIP: family.srcIP,
    fromPod: isPod(inp.src),
    backend: n.ctx.backendType ?? "vxlan",
    lease: family.lease(n.ctx, dst),
    text: (l) => family.text(inp.nodes, l),
  };
}
