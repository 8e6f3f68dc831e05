/**
 * IPv6 underlay selection, as flanneld's (pkg/ipmatch LookupExtIface with the v6 and dual stacks): which
 * interface and which IPv6 address the daemon uses, and which public IPv6 it announces. Dual stack first
 * chooses the interface the IPv4 way ({@link selectIface}), after mapping `--iface <IPv6 address>` and
 * `--public-ipv6` to the interface that owns them; IPv6-only chooses it from the IPv6 addresses and routes.
 * Read-only: nothing is changed.
 * @module
 */
import { IPAddr } from "../base/cidr.ts";
import type { AddrInfo, LinkInfo, NetlinkHandle } from "../netlink/types.ts";
import type { ExternalIface } from "../backend/types.ts";
import { lookupRoute } from "../base/route_lookup.ts";
import { compileRegex, IfaceError, type IfaceSelection, mainRoutes, selectIface } from "./iface.ts";
import type { Log } from "../base/log.ts";

/** The flags the IPv6 selection reads on top of {@link IfaceSelection}. */
export interface IfaceSelectionV6 extends IfaceSelection {
  /** `--public-ipv6`: the IPv6 announced to peers (default: the interface's IPv6 address). */
  publicIPv6: string | null;
}

/** Which families the network config enables. */
export interface Families {
  v4: boolean;
  v6: boolean;
}

/** Usable IPv6 addresses of an interface: not link-local, not host scope, not tentative-only loopback. */
function v6Addrs(addrs: AddrInfo[], index: number): AddrInfo[] {
  return addrs.filter((a) => a.index === index && a.family === 6 && a.scope === "global");
}

function isV6(s: string): boolean {
  return IPAddr.tryParse(s)?.family === 6;
}

function canon(s: string): string {
  return IPAddr.parse(s).toString();
}

/** The interface that owns IPv6 address `ip`, or null. */
function ownerOf(addrs: AddrInfo[], links: LinkInfo[], ip: string): LinkInfo | null {
  const a = addrs.find((x) => x.family === 6 && x.local === ip);
  return a ? links.find((l) => l.index === a.index) ?? null : null;
}

/**
 * The interface that owns `--public-ipv6` (flanneld: without --iface it must be an address of this host).
 * Throws {@link IfaceError} when no interface has it.
 */
function ownerOfPublic6(addrs: AddrInfo[], links: LinkInfo[], pub6: string): LinkInfo {
  const link = ownerOf(addrs, links, pub6);
  if (!link) {
    throw new IfaceError(
      `--public-ipv6: ${pub6} is not an address of this host; add it to the underlay interface, or name ` +
        `the interface with --iface when the address is NATed`,
    );
  }
  return link;
}

/** Validates `--public-ipv6` (an IPv6 address) and returns its canonical text, or null when not given. */
function publicV6(sel: IfaceSelectionV6): string | null {
  if (!sel.publicIPv6) return null;
  if (!isV6(sel.publicIPv6)) {
    throw new IfaceError(`--public-ipv6: '${sel.publicIPv6}' is not an IPv6 address; give e.g. fc00:99::11`);
  }
  return canon(sel.publicIPv6);
}

/** Chooses the interface from IPv6 facts only (IPv6-only networks). */
function pickV6Link(
  nl: NetlinkHandle,
  sel: IfaceSelectionV6,
  links: LinkInfo[],
  addrs: AddrInfo[],
  pub6: string | null,
  log?: Pick<Log, "info">,
): { link: LinkInfo; ip: string | null } {
  if (sel.iface.length) {
    for (const want of sel.iface) {
      if (IPAddr.tryParse(want)) {
        const link = isV6(want) ? ownerOf(addrs, links, canon(want)) : null;
        if (link) return { link, ip: canon(want) };
      } else {
        const link = links.find((l) => l.name === want);
        if (link) return { link, ip: null };
      }
      log?.info("no valid interface for this candidate, trying the next", {
        candidate: `--iface ${want}`,
        why: !IPAddr.tryParse(want)
          ? "no such interface"
          : isV6(want)
          ? "no interface has this IPv6 address"
          : "an IPv4 address, and the network is IPv6-only",
      });
    }
    throw new IfaceError(`--iface: none of ${sel.iface.join(", ")} is an interface or IPv6 address here`);
  }
  if (sel.ifaceRegex.length) {
    for (const src of sel.ifaceRegex) {
      const re = compileRegex(src);
      for (const l of links) {
        if (l.name === "lo") continue;
        const a = v6Addrs(addrs, l.index).find((x) => re.test(x.local));
        if (a) return { link: l, ip: a.local };
      }
      const byName = links.find((l) => l.name !== "lo" && re.test(l.name));
      if (byName) return { link: byName, ip: null };
    }
    throw new IfaceError(
      `--iface-regex: no interface name or IPv6 address matches ${sel.ifaceRegex.join(", ")}`,
    );
  }
  if (sel.ifaceCanReach) {
    if (!isV6(sel.ifaceCanReach)) {
      throw new IfaceError(
        `--iface-can-reach '${sel.ifaceCanReach}' is not an IPv6 address (the network is IPv6-only)`,
      );
    }
    const best = lookupRoute(mainRoutes(nl, 6), sel.ifaceCanReach);
    const link = best ? links.find((l) => l.name === best.devName) ?? null : null;
    if (!link) throw new IfaceError(`--iface-can-reach: no IPv6 route to ${sel.ifaceCanReach}`);
    return { link, ip: null };
  }
  if (pub6) return { link: ownerOfPublic6(addrs, links, pub6), ip: pub6 };
  const dflt = mainRoutes(nl, 6).filter((r) => r.net.prefix === 0).sort((a, b) => a.metric - b.metric)[0];
  const link = dflt ? links.find((l) => l.name === dflt.devName) ?? null : null;
  if (!link) {
    throw new IfaceError(
      "no IPv6 default route: cannot choose the external interface (pass --iface NAME or --iface-regex)",
    );
  }
  return { link, ip: null };
}

/**
 * Picks the external interface for the enabled families and fills `ifaceIPv6`/`publicIPv6` when IPv6 is
 * on. IPv4 only: exactly {@link selectIface}. IPv6-only: `ifaceIP` is "" and `publicIP` "0.0.0.0" (what
 * flanneld puts in an IPv6-only lease). Throws {@link IfaceError} naming the flag to fix. Candidates that
 * fall through are reported to `log` (flanneld logs each at info).
 */
export function selectExternal(
  nl: NetlinkHandle,
  sel: IfaceSelectionV6,
  fam: Families,
  log?: Pick<Log, "info">,
): ExternalIface {
  if (!fam.v6) return selectIface(nl, sel, log);
  const links = nl.links();
  const addrs = nl.addrs(6);
  const pub6 = publicV6(sel);
  let ext: ExternalIface;
  let chosen6: string | null = null;
  if (fam.v4) {
    // --iface entries that are IPv6 addresses name the interface that owns them (flanneld's dual branch).
    const iface = sel.iface.map((w) => {
      if (!isV6(w)) return w;
      const l = ownerOf(addrs, links, canon(w));
      if (l) chosen6 ??= canon(w);
      return l ? l.name : w;
    });
    // --iface-can-reach with an IPv6 target: the interface the kernel routes it through, chosen by name.
    let canReach = sel.ifaceCanReach;
    if (!iface.length && !sel.ifaceRegex.length && canReach && isV6(canReach)) {
      const best = lookupRoute(mainRoutes(nl, 6), canReach);
      const l = best ? links.find((x) => x.name === best.devName) : undefined;
      if (!l) throw new IfaceError(`--iface-can-reach: no IPv6 route to ${canReach}`);
      iface.push(l.name);
      canReach = null;
    }
    const noChoice = !sel.iface.length && !sel.ifaceRegex.length && !sel.ifaceCanReach;
    if (noChoice && pub6) {
      // flanneld: without --iface, --public-ipv6 must be an address of this host, on the chosen interface.
      const l = ownerOfPublic6(addrs, links, pub6);
      if (!sel.publicIP) iface.push(l.name);
      chosen6 = pub6;
    }
    ext = selectIface(nl, { ...sel, iface, ifaceCanReach: canReach }, log);
    if (noChoice && pub6) {
      const l = ownerOf(addrs, links, pub6)!;
      if (l.name !== ext.name) {
        throw new IfaceError(
          `--public-ipv6: ${pub6} is on ${l.name}, but the IPv4 underlay is ${ext.name}: both families must ` +
            `use one interface (pass --iface ${l.name} or an address of ${ext.name})`,
        );
      }
    }
  } else {
    const { link, ip } = pickV6Link(nl, sel, links, addrs, pub6, log);
    ext = { name: link.name, index: link.index, mtu: link.mtu, ifaceIP: "", publicIP: "0.0.0.0" };
    chosen6 = ip;
  }
  const own = v6Addrs(addrs, ext.index);
  if (chosen6 && !own.some((a) => a.local === chosen6)) chosen6 = null;
  const ip6 = chosen6 ?? own[0]?.local ?? null;
  if (!ip6) {
    throw new IfaceError(
      `interface ${ext.name} has no global IPv6 address, but the network config enables IPv6 (add one, ` +
        `choose another interface with --iface, or set EnableIPv6 false)`,
    );
  }
  return { ...ext, ifaceIPv6: ip6, publicIPv6: pub6 ?? ip6 };
}
