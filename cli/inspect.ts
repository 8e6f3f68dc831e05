/**
 * `flanctl inspect [links|veths|addrs|routes|neigh|fdb|all] [--netns NAME] [-o table|json]`: the kernel's
 * network state as the kernel layer reads it, in aligned tables (rendered by lib/inspect/render.ts) or JSON.
 * libnl is imported inside the action, so `flanctl inspect --help` works without it.
 * @module
 */
import type { Command } from "commander";
import { UsageError } from "../lib/errors.ts";
import type { NetnsRef } from "../lib/netlink/types.ts";
import {
  addrsTable,
  allTables,
  fdbTable,
  type InspectAll,
  linksTable,
  neighTable,
  routesTable,
  vethsTable,
} from "../lib/inspect/render.ts";

// The renderers moved to lib/inspect/render.ts; re-exported so this module's API is unchanged.
export type { InspectAll } from "../lib/inspect/render.ts";
export {
  addrsTable,
  fdbSubnet,
  fdbTable,
  linksTable,
  neighSubnet,
  neighTable,
  routesTable,
  table,
  vethsTable,
} from "../lib/inspect/render.ts";

/** What `inspect` can show. */
export const INSPECT_KINDS = ["links", "veths", "addrs", "routes", "neigh", "fdb", "all"] as const;
/** One of {@link INSPECT_KINDS}. */
export type InspectKind = typeof INSPECT_KINDS[number];

/** Options of `flanctl inspect`. */
export interface InspectOptions {
  netns?: string;
  output?: string;
}

/** `--netns` value to a reference: a name, an absolute nsfs path, or `pid:PID`. */
export function parseNetnsArg(v: string): NetnsRef {
  if (v.startsWith("/")) return { path: v };
  const m = /^pid:(\d+)$/.exec(v);
  if (m) return { pid: Number(m[1]) };
  if (v === "" || v.includes("/") || v === "." || v === "..") {
    throw new UsageError(`--netns: '${v}' is not a namespace name (see 'ip netns list'), path or pid:PID`);
  }
  return { name: v };
}

function output(v: unknown): "table" | "json" {
  if (v === undefined || v === "table") return "table";
  if (v === "json") return "json";
  throw new UsageError(`-o/--output: '${v}' is not one of table, json`);
}

function kind(v: unknown): InspectKind {
  if (v === undefined) return "all";
  if ((INSPECT_KINDS as readonly string[]).includes(String(v))) return v as InspectKind;
  throw new UsageError(`inspect: '${v}' is not one of ${INSPECT_KINDS.join(", ")}`);
}

/** Runs `flanctl inspect` and returns the text to print. */
export async function runInspect(what: string | undefined, opts: InspectOptions): Promise<string> {
  const k = kind(what);
  const out = output(opts.output);
  const ref = opts.netns !== undefined ? parseNetnsArg(opts.netns) : null;
  const { openNetlink } = await import("../lib/netlink/mod.ts");
  const veths = async () => {
    const { listVethPairs } = await import("../lib/kernel/veths.ts");
    const label = ref === null
      ? undefined
      : "name" in ref
      ? ref.name
      : "pid" in ref
      ? `pid:${ref.pid}`
      : undefined;
    if (ref !== null && label === undefined) {
      throw new UsageError("--netns: inspect veths takes a namespace name or pid:PID, not a path");
    }
    return listVethPairs(label === undefined ? {} : { netns: label });
  };
  if (k === "veths") {
    const v = await veths();
    return out === "json" ? JSON.stringify(v, null, 2) : vethsTable(v);
  }
  const h = openNetlink(ref);
  try {
    switch (k) {
      case "links": {
        const l = h.links();
        return out === "json" ? JSON.stringify(l, null, 2) : linksTable(l);
      }
      case "addrs": {
        const a = h.addrs();
        return out === "json" ? JSON.stringify(a, null, 2) : addrsTable(a);
      }
      case "routes": {
        const r = h.routes();
        return out === "json" ? JSON.stringify(r, null, 2) : routesTable(r);
      }
      case "neigh": {
        const n = h.neighbours();
        return out === "json" ? JSON.stringify(n, null, 2) : neighTable(n, h.routes());
      }
      case "fdb": {
        const f = h.fdb();
        if (out === "json") return JSON.stringify(f, null, 2);
        const names = new Map(h.links().map((l) => [l.index, l.name]));
        return fdbTable(f, names, h.neighbours(), h.routes());
      }
      default: {
        const all: InspectAll = {
          links: h.links(),
          veths: await veths(),
          addrs: h.addrs(),
          routes: h.routes(),
          neigh: h.neighbours(),
          fdb: h.fdb(),
        };
        return out === "json" ? JSON.stringify(all, null, 2) : allTables(all);
      }
    }
  } finally {
    h.close();
  }
}

/** Registers `inspect` on the command tree. */
export function register(program: Command): void {
  program
    .command("inspect")
    .description(
      "show links, veth pairs, addresses, routes, neighbours and FDB entries as the kernel has them",
    )
    .argument("[what]", `one of ${INSPECT_KINDS.join(", ")}`, "all")
    .option("--netns <name>", "network namespace to read (name, /path, or pid:PID); default: this one")
    .option("-o, --output <format>", "table or json", "table")
    .addHelpText(
      "after",
      "\n`inspect veths` pairs veths across every namespace on the host; with --netns, the pairs with an end" +
        " there.\nJSON: links/addrs/routes/neigh/fdb are lists of the objects in lib/netlink/types.ts; veths is" +
        ' a list of {"name","ifindex","netns","peer":{"name","ifindex","netns"}} (netns null = this one).',
    )
    .action(async (what: string | undefined, opts: InspectOptions) => {
      const text = await runInspect(what, opts);
      console.log(text);
    });
}
