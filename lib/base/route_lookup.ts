/**
 * Route lookups over a list of routes held in memory, as the kernel's FIB would answer them: which route a
 * destination takes (longest prefix, then lowest metric), used to choose the daemon's interface
 * (`--iface-can-reach`) and to decide whether a peer's public IP is directly reachable (vxlan
 * DirectRouting, host-gw); and the allocation-free IPv4 CIDR parse the reconciler's route pass runs on
 * every dumped route.
 * @module
 */
import { IPAddr, type IPNet } from "./cidr.ts";

/** A route used to decide whether a public IP is directly reachable. */
export interface UnderlayRoute {
  net: IPNet;
  gateway: string | null;
  devName: string | null;
  metric: number;
}

/** Finds the route the kernel would use for `ip` among `routes` (longest prefix, then lowest metric). */
export function lookupRoute(routes: readonly UnderlayRoute[], ip: string): UnderlayRoute | null {
  const a = IPAddr.tryParse(ip);
  if (!a) return null;
  let best: UnderlayRoute | null = null;
  for (const r of routes) {
    if (!r.net.contains(a)) continue;
    if (
      !best || r.net.prefix > best.net.prefix || (r.net.prefix === best.net.prefix && r.metric < best.metric)
    ) {
      best = r;
    }
  }
  return best;
}

/** Parses "a.b.c.d" or "a.b.c.d/p" into [uint32, prefix] without allocating bigints (hot path: every route
 * of every pass). Returns null for anything else (IPv6, "default", garbage). */
export function v4Cidr(s: string): [number, number] | null {
  const slash = s.indexOf("/");
  const ip = slash < 0 ? s : s.slice(0, slash);
  const prefix = slash < 0 ? 32 : Number(s.slice(slash + 1));
  if (!(prefix >= 0 && prefix <= 32)) return null;
  let v = 0, parts = 0, cur = -1;
  for (let i = 0; i <= ip.length; i++) {
    const c = i < ip.length ? ip.charCodeAt(i) : 46;
    if (c === 46) {
      if (cur < 0 || cur > 255) return null;
      v = v * 256 + cur;
      parts++;
      cur = -1;
    } else if (c >= 48 && c <= 57) cur = (cur < 0 ? 0 : cur * 10) + (c - 48);
    else return null;
  }
  return parts === 4 ? [v, prefix] : null;
}
