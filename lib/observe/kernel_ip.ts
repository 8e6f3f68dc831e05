/**
 * A read-only kernel snapshot taken with iproute2's JSON output (`ip -j`, `bridge -j`). Used when the
 * libnl-backed `openNetlink` (lib/netlink/mod.ts) cannot be loaded, so the doctor still works on a
 * node where the FFI layer is broken — which is exactly when an operator needs it. Produces the same
 * typed views as {@link NetlinkHandle}.
 * @module
 */
import type { AddrInfo, FdbInfo, LinkInfo, NeighInfo, RouteInfo } from "../netlink/types.ts";
import { RT_TABLE_DEFAULT, RT_TABLE_LOCAL, RT_TABLE_MAIN } from "../netlink/mod.ts";
import type { ExecResult, NsExec } from "./exec.ts";

/** The read-only part of the netlink handle the doctor needs. */
export interface KernelReader {
  links(): LinkInfo[];
  addrs(family?: 4 | 6): AddrInfo[];
  routes(opts?: { family?: 4 | 6; table?: number }): RouteInfo[];
  neighbours(family?: 4 | 6): NeighInfo[];
  fdb(): FdbInfo[];
  close(): void;
}

// deno-lint-ignore no-explicit-any
type J = any;

const TABLES: Record<string, number> = {
  main: RT_TABLE_MAIN,
  local: RT_TABLE_LOCAL,
  default: RT_TABLE_DEFAULT,
};

/** The commands behind the reader's default views (all links, addresses, routes, neighbours, fdb). */
const SNAPSHOT_COMMANDS: string[][] = [
  ["ip", "-d", "-j", "link", "show"],
  ["ip", "-j", "addr", "show"],
  ["ip", "-4", "-j", "route", "show", "table", "all"],
  ["ip", "-6", "-j", "route", "show", "table", "all"],
  ["ip", "-4", "-j", "neigh", "show"],
  ["ip", "-6", "-j", "neigh", "show"],
  ["bridge", "-j", "fdb", "show"],
];

/**
 * {@link KernelReader} over `ip -j`/`bridge -j` run in the namespace of an {@link NsExec}. The commands run
 * asynchronously in {@link IpCliReader.load}; the views then read their output (so only the default views,
 * the ones the doctor's snapshot takes, are answered).
 */
export class IpCliReader implements KernelReader {
  #linkCache: LinkInfo[] | null = null;
  private constructor(private readonly outputs: Map<string, ExecResult>) {}

  /** Runs the snapshot's commands in the namespace of `exec`, stopping at the first that fails. */
  static async load(exec: NsExec): Promise<IpCliReader> {
    const outputs = new Map<string, ExecResult>();
    for (const cmd of SNAPSHOT_COMMANDS) {
      const r = await exec.run(cmd);
      outputs.set(cmd.join(" "), r);
      if (r.code !== 0) break;
    }
    return new IpCliReader(outputs);
  }

  #json(cmd: string[]): J[] {
    const r = this.outputs.get(cmd.join(" "));
    if (!r) throw new Error(`${cmd.join(" ")} not run (not part of the snapshot)`);
    if (r.code !== 0) throw new Error(`${cmd.join(" ")} failed: ${r.stderr.trim()}`);
    return r.stdout.trim() ? JSON.parse(r.stdout) : [];
  }

  links(): LinkInfo[] {
    if (this.#linkCache) return this.#linkCache;
    const raw = this.#json(["ip", "-d", "-j", "link", "show"]);
    const byName = new Map<string, number>(raw.map((l: J) => [l.ifname, l.ifindex]));
    this.#linkCache = raw.map((l: J): LinkInfo => {
      const kind: string | null = l.linkinfo?.info_kind ?? null;
      const d = l.linkinfo?.info_data ?? {};
      const info: LinkInfo = {
        index: l.ifindex,
        name: l.ifname,
        kind,
        flags: l.flags ?? [],
        up: (l.flags ?? []).includes("UP"),
        operstate: l.operstate ?? "UNKNOWN",
        mtu: l.mtu,
        mac: l.link_type === "ether" ? (l.address ?? null) : null,
        master: l.master ? (byName.get(l.master) ?? null) : null,
        parent: l.link_index ?? (l.link ? (byName.get(l.link) ?? null) : null),
        linkNetnsId: l.link_netnsid ?? null,
      };
      if (kind === "vxlan") {
        info.vxlan = {
          vni: d.id,
          port: d.port ?? 0,
          local: d.local ?? null,
          dev: d.link ? (byName.get(d.link) ?? null) : null,
          learning: !!d.learning,
          gbp: !!d.gbp,
        };
      }
      if (l.linkinfo?.info_slave_kind === "bridge") {
        info.bridgePort = { hairpin: !!l.linkinfo.info_slave_data?.hairpin };
      }
      return info;
    });
    return this.#linkCache!;
  }

  addrs(family?: 4 | 6): AddrInfo[] {
    const out: AddrInfo[] = [];
    for (const l of this.#json(["ip", "-j", "addr", "show"])) {
      for (const a of l.addr_info ?? []) {
        const fam = a.family === "inet" ? 4 : a.family === "inet6" ? 6 : null;
        if (!fam || (family && fam !== family)) continue;
        out.push({
          index: l.ifindex,
          ifname: l.ifname,
          family: fam,
          local: a.local,
          prefix: a.prefixlen,
          scope: a.scope,
        });
      }
    }
    return out;
  }

  routes(opts: { family?: 4 | 6; table?: number } = {}): RouteInfo[] {
    const idx = new Map(this.links().map((l) => [l.name, l.index]));
    const out: RouteInfo[] = [];
    for (const fam of opts.family ? [opts.family] : [4, 6] as const) {
      const table = opts.table !== undefined ? String(opts.table) : "all";
      for (const r of this.#json(["ip", `-${fam}`, "-j", "route", "show", "table", table])) {
        const tableId = r.table === undefined
          ? (opts.table ?? RT_TABLE_MAIN)
          : (Object.hasOwn(TABLES, r.table) ? TABLES[r.table] : Number(r.table));
        if (opts.table === undefined && tableId === 255) continue;
        let dst: string = r.dst;
        if (dst !== "default" && !dst.includes("/")) dst += fam === 4 ? "/32" : "/128";
        out.push({
          family: fam,
          dst,
          gateway: r.gateway ?? null,
          dev: r.dev ? (idx.get(r.dev) ?? null) : null,
          devName: r.dev ?? null,
          scope: r.scope === "global" || r.scope === undefined ? "universe" : r.scope,
          flags: r.flags ?? [],
          table: tableId,
          protocol: r.protocol ?? "boot",
          type: r.type ?? "unicast",
          prefsrc: r.prefsrc ?? null,
          metric: r.metric ?? null,
        });
      }
    }
    return out;
  }

  neighbours(family?: 4 | 6): NeighInfo[] {
    const idx = new Map(this.links().map((l) => [l.name, l.index]));
    const out: NeighInfo[] = [];
    for (const fam of family ? [family] : [4, 6] as const) {
      for (const n of this.#json(["ip", `-${fam}`, "-j", "neigh", "show"])) {
        out.push({
          family: fam,
          index: idx.get(n.dev) ?? 0,
          ifname: n.dev,
          dst: n.dst,
          lladdr: n.lladdr ?? null,
          state: n.state ?? [],
        });
      }
    }
    return out;
  }

  fdb(): FdbInfo[] {
    const idx = new Map(this.links().map((l) => [l.name, l.index]));
    return this.#json(["bridge", "-j", "fdb", "show"]).map((f: J): FdbInfo => ({
      index: idx.get(f.ifname) ?? 0,
      ifname: f.ifname,
      mac: f.mac,
      dst: f.dst ?? null,
      master: f.master ? (idx.get(f.master) ?? null) : null,
      flags: f.flags ?? [],
      state: f.state ? [String(f.state).toUpperCase()] : [],
      vlan: f.vlan ?? null,
    }));
  }

  close(): void {}
}
