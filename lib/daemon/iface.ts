/**
 * Chooses the external (underlay) interface and the public IP, as flanneld does: `--iface` (names or IPs,
 * first match wins), else `--iface-regex`, else `--iface-can-reach` (the interface the kernel would route
 * that IP through), else the interface of the default route. Read-only: nothing is changed.
 * @module
 */
import { FlanctlError } from "../errors.ts";
import { IPAddr } from "../ip/cidr.ts";
import type { AddrInfo, LinkInfo, NetlinkHandle } from "../netlink/types.ts";
import type { ExternalIface } from "../backend/types.ts";
import { lookupRoute, type UnderlayRoute } from "../reconcile/reconciler.ts";
import { IPNet } from "../ip/cidr.ts";

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

function v4Addrs(addrs: AddrInfo[], index: number): AddrInfo[] {
  return addrs.filter((a) => a.index === index && a.family === 4 && a.scope !== "host");
}

/** Picks the external interface and public IP. Throws {@link IfaceError} naming the flag to fix. */
export function selectIface(nl: NetlinkHandle, sel: IfaceSelection): ExternalIface {
  const links = nl.links();
  const addrs = nl.addrs(4);
  let link: LinkInfo | null = null;
  let ip: string | null = null;
  const byIndex = (i: number) => links.find((l) => l.index === i) ?? null;

  if (sel.iface.length) {
    for (const want of sel.iface) {
      if (IPAddr.tryParse(want)) {
        const a = addrs.find((x) => x.local === want);
        if (a) [link, ip] = [byIndex(a.index), want];
      } else {
        link = links.find((l) => l.name === want) ?? null;
      }
      if (link) break;
    }
    if (!link) throw new IfaceError(`--iface: none of ${sel.iface.join(", ")} exists here (see 'ip addr')`);
  } else if (sel.ifaceRegex.length) {
    for (const src of sel.ifaceRegex) {
      let re: RegExp;
      try {
        re = new RegExp(src);
      } catch (e) {
        throw new IfaceError(
          `--iface-regex '${src}' is not a valid regular expression: ${(e as Error).message}`,
        );
      }
      for (const l of links) {
        if (l.name === "lo") continue;
        const a = v4Addrs(addrs, l.index).find((x) => re.test(x.local));
        if (re.test(l.name) || a) {
          [link, ip] = [l, a && !re.test(l.name) ? a.local : null];
          break;
        }
      }
      if (link) break;
    }
    if (!link) {
      throw new IfaceError(
        `--iface-regex: no interface name or address matches ${sel.ifaceRegex.join(", ")}`,
      );
    }
  } else {
    const routes: UnderlayRoute[] = [];
    const prefsrc = new Map<UnderlayRoute, string | null>();
    for (const r of nl.routes({ family: 4, table: 254 })) {
      const net = r.dst === "default" ? IPNet.parse("0.0.0.0/0") : IPNet.tryParse(r.dst);
      if (!net || r.dev === null || r.type !== "unicast") continue;
      const u = { net, gateway: r.gateway, devName: r.devName, metric: r.metric ?? 0 };
      routes.push(u);
      prefsrc.set(u, r.prefsrc);
    }
    const target = sel.ifaceCanReach ?? "0.0.0.0";
    if (sel.ifaceCanReach && !IPAddr.tryParse(sel.ifaceCanReach)) {
      throw new IfaceError(`--iface-can-reach '${sel.ifaceCanReach}' is not an IP address`);
    }
    const best = sel.ifaceCanReach
      ? lookupRoute(routes, target)
      : routes.filter((r) => r.net.prefix === 0).sort((a, b) => a.metric - b.metric)[0] ?? null;
    if (!best) {
      throw new IfaceError(
        sel.ifaceCanReach
          ? `--iface-can-reach: no route to ${sel.ifaceCanReach}`
          : "no default route: cannot choose the external interface (pass --iface NAME or --iface-regex)",
      );
    }
    link = links.find((l) => l.name === best.devName) ?? null;
    ip = prefsrc.get(best) ?? null;
    if (!link) throw new IfaceError(`interface ${best.devName} of the chosen route disappeared`);
  }

  const own = v4Addrs(addrs, link.index);
  if (ip && !own.some((a) => a.local === ip)) ip = null;
  ip ??= own.find((a) => a.scope === "global")?.local ?? own[0]?.local ?? null;
  if (!ip) {
    throw new IfaceError(
      `interface ${link.name} has no IPv4 address (add one or choose another with --iface)`,
    );
  }
  let publicIP = ip;
  if (sel.publicIP) {
    const p = IPAddr.tryParse(sel.publicIP);
    if (!p || p.family !== 4) throw new IfaceError(`--public-ip '${sel.publicIP}' is not an IPv4 address`);
    publicIP = p.toString();
  }
  return { name: link.name, index: link.index, mtu: link.mtu, ifaceIP: ip, publicIP };
}
