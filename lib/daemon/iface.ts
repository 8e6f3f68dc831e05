/**
 * Chooses the external (underlay) interface and the public IP exactly as flanneld (main.go and
 * pkg/ipmatch): with none of `--iface`, `--iface-regex`, `--iface-can-reach`, the interface that owns
 * `--public-ip` when given, else the interface of the default route. Otherwise each `--iface` (name or IP)
 * in order, then each `--iface-regex` (first an address, then a name matching it), then
 * `--iface-can-reach` (the interface the route to that IP leaves by); a candidate that does not exist or
 * has no usable IPv4 address falls through to the next, and only when all fail is it an error, naming
 * every candidate and why. Usable addresses are IPv4 global or link-local unicast, global first.
 * Read-only: nothing is changed.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { IPAddr, IPNet } from "../base/cidr.ts";
import type { AddrInfo, LinkInfo, NetlinkHandle } from "../netlink/types.ts";
import { RT_TABLE_MAIN } from "../netlink/mod.ts";
import type { ExternalIface } from "../backend/types.ts";
import { lookupRoute, type UnderlayRoute } from "../base/route_lookup.ts";
import type { Log } from "../base/log.ts";

/** No usable interface / address was found. */
export class IfaceError extends FlanctlError {
  constructor(message: string) {
    super(message, 1);
  }
}

/** How to choose the interface (the flanneld flags). */
export interface IfaceSelection {
  iface: string[];
  ifaceRegex: string[];
  ifaceCanReach: string | null;
  publicIP: string | null;
}

/** A candidate that failed, with the reason (falls through to the next). */
class NoMatch extends Error {}

/** IPv4 global or link-local unicast (Go's IsGlobalUnicast || IsLinkLocalUnicast). */
function usable(ip: string): boolean {
  const a = IPAddr.tryParse(ip);
  if (!a || a.family !== 4) return false;
  const [o1] = ip.split(".").map(Number);
  return ip !== "0.0.0.0" && ip !== "255.255.255.255" && o1 !== 127 && o1 < 224;
}

function isLinkLocal(ip: string): boolean {
  return ip.startsWith("169.254.");
}

/** The usable IPv4 addresses of interface `index`, in flanneld's preference order (global before link-local). */
function addrsOf(addrs: readonly AddrInfo[], index: number): string[] {
  const own = addrs.filter((a) => a.index === index && a.family === 4 && usable(a.local)).map((a) => a.local);
  return [...own.filter((a) => !isLinkLocal(a)), ...own.filter(isLinkLocal)];
}

/**
 * An `--iface-regex` pattern in Go regexp syntax where JavaScript spells it differently: a leading `(?i)`
 * (and other flag groups) becomes a flag. Throws {@link IfaceError} for a pattern that does not compile.
 */
export function compileRegex(src: string): RegExp {
  const m = /^\(\?([imsU]+)\)/.exec(src);
  const flags = m ? [...new Set(m[1].replace("U", "").split(""))].join("") : "";
  try {
    return new RegExp(m ? src.slice(m[0].length) : src, flags);
  } catch (e) {
    throw new IfaceError(
      `--iface-regex: '${src}' is not a valid regular expression (${(e as Error).message}); fix the pattern`,
    );
  }
}

/** A main-table unicast route of the underlay, with its preferred source address. */
export type MainRoute = UnderlayRoute & { prefsrc: string | null };

/** The unicast routes of `family` in the main table (for --iface-can-reach and the default route). */
export function mainRoutes(nl: NetlinkHandle, family: 4 | 6): MainRoute[] {
  const out: MainRoute[] = [];
  const any = IPNet.parse(family === 4 ? "0.0.0.0/0" : "::/0");
  for (const r of nl.routes({ family, table: RT_TABLE_MAIN })) {
    const net = r.dst === "default" ? any : IPNet.tryParse(r.dst);
    if (r.family !== family || !net || r.dev === null || r.type !== "unicast") continue;
    out.push({ net, gateway: r.gateway, devName: r.devName, metric: r.metric ?? 0, prefsrc: r.prefsrc });
  }
  return out;
}

/** Picks the external interface and public IP. Throws {@link IfaceError} naming the flags to fix. */
export function selectIface(nl: NetlinkHandle, sel: IfaceSelection, log?: Pick<Log, "info">): ExternalIface {
  const links = nl.links();
  const addrs = nl.addrs(4);
  const byIndex = (i: number) => links.find((l) => l.index === i) ?? null;
  let publicIP: string | null = null;
  if (sel.publicIP) {
    const p = IPAddr.tryParse(sel.publicIP);
    if (!p || p.family !== 4) {
      throw new IfaceError(`--public-ip: '${sel.publicIP}' is not an IPv4 address; give this node's address`);
    }
    publicIP = p.toString();
  }
  const regexes = sel.ifaceRegex.map((r) => [r, compileRegex(r)] as const);
  if (sel.ifaceCanReach && IPAddr.tryParse(sel.ifaceCanReach)?.family !== 4) {
    throw new IfaceError(
      `--iface-can-reach: '${sel.ifaceCanReach}' is not an IPv4 address; give a peer's address`,
    );
  }

  /** The interface owning `ip` (any IPv4 address of it), with that address. */
  const byIP = (ip: string): [LinkInfo, string] => {
    const a = addrs.find((x) => x.family === 4 && x.local === ip);
    const l = a ? byIndex(a.index) : null;
    if (!l) throw new NoMatch(`no interface has the address ${ip}`);
    return [l, ip];
  };
  /** Completes a choice: the address (first usable unless given) and the MTU. */
  const finish = (l: LinkInfo, ip: string | null): ExternalIface => {
    const addr = ip ?? addrsOf(addrs, l.index)[0];
    if (!addr) throw new NoMatch(`interface ${l.name} has no usable IPv4 address`);
    if (!l.mtu) throw new NoMatch(`interface ${l.name} has no MTU`);
    return { name: l.name, index: l.index, mtu: l.mtu, ifaceIP: addr, publicIP: publicIP ?? addr };
  };

  // No selection flag: the owner of --public-ip, else the default route's interface (no fall-through).
  if (!sel.iface.length && !regexes.length && !sel.ifaceCanReach) {
    try {
      if (publicIP) {
        const [l, ip] = byIP(publicIP);
        return finish(l, ip);
      }
      const def = mainRoutes(nl, 4).filter((r) => r.net.prefix === 0).sort((a, b) => a.metric - b.metric)[0];
      const l = def ? links.find((x) => x.name === def.devName) ?? null : null;
      if (!l) {
        throw new NoMatch("no default route: pass --iface NAME, --iface-regex RE or --iface-can-reach IP");
      }
      return finish(l, null);
    } catch (e) {
      if (!(e instanceof NoMatch)) throw e;
      const hint = publicIP
        ? "--public-ip alone selects the interface that has it; behind NAT also pass --iface NAME"
        : "choose one with --iface NAME";
      throw new IfaceError(`no interface to use: ${e.message}; ${hint}`);
    }
  }

  const candidates: [string, () => ExternalIface][] = [];
  for (const want of sel.iface) {
    candidates.push([`--iface ${want}`, () => {
      if (IPAddr.tryParse(want)) return finish(...byIP(want));
      const l = links.find((x) => x.name === want);
      if (!l) throw new NoMatch(`no interface named ${want}`);
      return finish(l, null);
    }]);
  }
  for (const [src, re] of regexes) {
    candidates.push([`--iface-regex ${src}`, () => {
      for (const l of links) {
        const hit = addrsOf(addrs, l.index).find((a) => re.test(a));
        if (hit) return finish(l, hit);
      }
      const l = links.find((x) => re.test(x.name));
      if (!l) {
        const avail = links.map((x) => `${x.name}:[${addrsOf(addrs, x.index).join(" ")}]`).join(", ");
        throw new NoMatch(`no interface name or address matches (available: ${avail})`);
      }
      return finish(l, null);
    }]);
  }
  if (sel.ifaceCanReach) {
    const target = sel.ifaceCanReach;
    candidates.push([`--iface-can-reach ${target}`, () => {
      const best = lookupRoute(mainRoutes(nl, 4), target) as MainRoute | null;
      const l = best ? links.find((x) => x.name === best.devName) ?? null : null;
      if (!best || !l) throw new NoMatch(`no route to ${target}`);
      return finish(l, best.prefsrc && addrsOf(addrs, l.index).includes(best.prefsrc) ? best.prefsrc : null);
    }]);
  }
  const why: string[] = [];
  for (const [what, pick] of candidates) {
    try {
      return pick();
    } catch (e) {
      if (!(e instanceof NoMatch)) throw e;
      log?.info("no valid interface for this candidate, trying the next", {
        candidate: what,
        why: e.message,
      });
      why.push(`${what}: ${e.message}`);
    }
  }
  throw new IfaceError(
    `no interface matches --iface/--iface-regex/--iface-can-reach (${
      why.join("; ")
    }); see 'ip addr' and fix the flags`,
  );
}
