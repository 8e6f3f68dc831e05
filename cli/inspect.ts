/**
 * `flanctl inspect [links|veths|addrs|routes|neigh|fdb|all] [--netns NAME] [-o table|json]`: the kernel's
 * network state as the kernel layer reads it, in aligned tables (rendered by lib/inspect/render.ts) or JSON.
 * libnl is imported inside the action, so `flanctl inspect --help` works without it.
 * @module
 */
import type { Command } from "commander";
import { UsageError } from "../lib/base/errors.ts";
import type { NetnsRef } from "../lib/netlink/types.ts";
import { parseOutput } from "../lib/base/ui/output.ts";
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
import {
  addrView,
  fdbView,
  type InspectView,
  isFlannelDev,
  linkNames,
  linkView,
  neighView,
  routeView,
  sortFdb,
  sortNeigh,
  vethView,
} from "../lib/inspect/views.ts";
import { writeOut } from "./stdout.ts";

export type { InspectAll } from "../lib/inspect/render.ts";
export type {
  AddrView,
  FdbView,
  InspectView,
  LinkView,
  NeighView,
  RouteView,
  VethView,
} from "../lib/inspect/views.ts";

/** What `inspect` can show. */
export const INSPECT_KINDS = [
  "links",
  "veths",
  "addrs",
  "routes",
  "neigh",
  "fdb",
  "wireguard",
  "all",
] as const;
/** One of {@link INSPECT_KINDS}. */
export type InspectKind = typeof INSPECT_KINDS[number];

/** Options of `flanctl inspect`. */
export interface InspectOptions {
  netns?: string;
  output?: string;
  /** Only what is on this interface (links: that link). */
  dev?: string;
  /** `inspect neigh` / `inspect fdb`: every device, not only flannel.* (their default). */
  all?: boolean;
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

function kind(v: unknown): InspectKind {
  if (v === undefined) return "all";
  if ((INSPECT_KINDS as readonly string[]).includes(String(v))) return v as InspectKind;
  throw new UsageError(
    `inspect: '${v}' is not one of ${INSPECT_KINDS.join(", ")}; see 'flanctl inspect --help'`,
  );
}

/**
 * The rows `inspect` shows: `--dev` keeps what is on that interface; `inspect neigh|fdb` without `--dev`
 * or `--all` keeps flannel.* entries only (the long tables: a node's bridge and underlay entries are
 * rarely what one looks for). Returns the rows and how many were left out by that default.
 */
function select<T>(rows: T[], devOf: (r: T) => string | null, opts: InspectOptions, flannelDefault: boolean) {
  if (opts.dev !== undefined) return { rows: rows.filter((r) => devOf(r) === opts.dev), hidden: 0 };
  if (!flannelDefault || opts.all) return { rows, hidden: 0 };
  const kept = rows.filter((r) => isFlannelDev(devOf(r)));
  return { rows: kept, hidden: rows.length - kept.length };
}

function hiddenNote(n: number, what: string): string {
  return n ? `\n(${n} ${what} on other devices not shown; --all shows them, --dev NAME one device)` : "";
}

/** Runs `flanctl inspect` and returns the text to print. */
export async function runInspect(what: string | undefined, opts: InspectOptions): Promise<string> {
  const k = kind(what);
  const out = parseOutput(opts.output);
  if (opts.dev !== undefined && !/^[^\s/]{1,15}$/.test(opts.dev)) {
    throw new UsageError(`--dev: '${opts.dev}' is not an interface name; see 'flanctl inspect links'`);
  }
  const ref = opts.netns !== undefined ? parseNetnsArg(opts.netns) : null;
  const { openNetlink } = await import("../lib/netlink/mod.ts");
  const veths = async () => {
    const { listVethPairs } = await import("../lib/observe/veths.ts");
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
    const pairs = (await listVethPairs(label === undefined ? {} : { netns: label })).map(vethView);
    return select(pairs, (p) => p.name, opts, false).rows;
  };
  const json = (v: unknown) => JSON.stringify(v, null, 2);
  if (k === "wireguard") {
    const { wireguardViews, wireguardTable } = await import("../lib/inspect/wireguard.ts");
    const v = await wireguardViews(opts.dev, undefined, { ns: ref });
    return out === "json" ? json(v) : wireguardTable(v);
  }
  if (k === "veths") {
    const v = await veths();
    return out === "json" ? json(v) : vethsTable(v);
  }
  const h = openNetlink(ref);
  try {
    const links = h.links();
    const names = linkNames(links);
    const linkRows = () => select(links.map((l) => linkView(l, names)), (l) => l.name, opts, false).rows;
    const addrRows = () => select(h.addrs().map(addrView), (a) => a.dev, opts, false).rows;
    const routes = k === "links" || k === "addrs" ? [] : h.routes();
    const routeRows = () => select(routes.map((r) => routeView(r, names)), (r) => r.dev, opts, false).rows;
    const neigh = k === "neigh" || k === "fdb" || k === "all" ? h.neighbours() : [];
    const neighRows = (flannelDefault: boolean) =>
      select(sortNeigh(neigh.map((n) => neighView(n, routes))), (n) => n.dev, opts, flannelDefault);
    const fdbRows = (flannelDefault: boolean) =>
      select(
        sortFdb(h.fdb().map((f) => fdbView(f, names, neigh, routes))),
        (f) => f.dev,
        opts,
        flannelDefault,
      );
    switch (k) {
      case "links": {
        const l = linkRows();
        return out === "json" ? json(l) : linksTable(l);
      }
      case "addrs": {
        const a = addrRows();
        return out === "json" ? json(a) : addrsTable(a);
      }
      case "routes": {
        const r = routeRows();
        return out === "json" ? json(r) : routesTable(r);
      }
      case "neigh": {
        const n = neighRows(true);
        return out === "json" ? json(n.rows) : neighTable(n.rows) + hiddenNote(n.hidden, "neighbours");
      }
      case "fdb": {
        const f = fdbRows(true);
        return out === "json" ? json(f.rows) : fdbTable(f.rows) + hiddenNote(f.hidden, "FDB entries");
      }
      default: {
        const all: InspectView = {
          links: linkRows(),
          veths: await veths(),
          addrs: addrRows(),
          routes: routeRows(),
          neigh: neighRows(false).rows,
          fdb: fdbRows(false).rows,
        };
        return out === "json" ? json(all satisfies InspectAll) : allTables(all);
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
    .option("--dev <name>", "only what is on this interface (links: that link)")
    .option("--all", "neigh, fdb: entries on every device (default: flannel.* only)")
    .option("-o, --output <format>", "table or json", "table")
    .addHelpText(
      "after",
      `
\`inspect veths\` pairs veths across every namespace on the host; with --netns, the pairs with an end there.
Neighbours and FDB entries are sorted by device and address; \`inspect neigh|fdb\` shows flannel.* entries
unless --all or --dev is given (\`inspect\` alone shows everything).
JSON (interfaces by name, ifindex beside, camelCase):
  links   [{"name","ifindex","kind","flags","up","operstate","mtu","mac","master","masterIfindex",
           "parent","parentIfindex","linkNetnsId","vxlan"?:{"vni","port","local","dev","devIfindex",
           "learning","gbp"},"bridgePort"?:{"hairpin"}}]
  addrs   [{"dev","ifindex","family","local","prefix","scope"}]
  routes  [{"family","dst","gateway","dev","ifindex","scope","flags","table","protocol","type","prefsrc",
           "metric"}]
  neigh   [{"family","dev","ifindex","dst","lladdr","state","subnet"}]
  fdb     [{"dev","ifindex","mac","dst","master","masterIfindex","flags","state","vlan","subnet"}]
  veths   [{"name","ifindex","netns","peer":{"name","ifindex","netns"}}] (netns null = this one)
  all     {"links","veths","addrs","routes","neigh","fdb"}`,
    )
    .action(async (what: string | undefined, opts: InspectOptions) => {
      const text = await runInspect(what, opts);
      writeOut(text + "\n"); // a closed pipe (`| head`) ends the output quietly
    });
}
