/**
 * The trust boundary between the lease store and the kernel. Every peer lease of one address family, from
 * any store (file, etcd, kube) and for any backend (vxlan with or without DirectRouting, host-gw, udp),
 * passes a {@link PeerGuard} before a backend turns it into routes, ARP or FDB entries; what it refuses is
 * never programmed. A peer is refused ({@link checkPeer}) when
 *
 * - its subnet is not inside the Network (IPv6Network), has another prefix length than the node subnets
 *   (SubnetLen; in kube mode the mask of our own podCIDR), is our subnet or overlaps it;
 * - its PublicIP is not a unicast address of the family: unspecified, loopback, multicast, broadcast,
 *   reserved, IPv4-mapped, inside the pod Network, link-local (unless our own underlay address is), or ours;
 * - its lease says vxlan and its VtepMAC is missing, a multicast/broadcast MAC or all zeros;
 * - its lease says wireguard and its PublicKey is not base64 of 32 bytes;
 * - another accepted lease claims the same subnet and is older (see {@link PeerGuard}).
 *
 * Pure: no kernel, no store, no clock except the one given to {@link RejectionReporter}.
 * @module
 */
import { IPAddr, IPNet } from "../base/cidr.ts";
import { badWgKey, vtepMacField, wgPublicKeyField } from "../lease/backend_data.ts";
import { safeJson } from "../base/capped_read.ts";

/** Why a peer is refused (the `reason` label of `flanctl_rejected_peers_total`). */
export const REJECT_REASONS = [
  "outside_network",
  "subnet_length",
  "own_subnet",
  "public_ip",
  "own_public_ip",
  "vtep_mac",
  "public_key",
  "conflict",
  "backend",
] as const;

/** One of {@link REJECT_REASONS}. */
export type RejectReason = typeof REJECT_REASONS[number];

/** A refusal: the reason (a metric label) and a one-line explanation (for the log). */
export interface Rejection {
  reason: RejectReason;
  detail: string;
}

/** What the guard reads of a peer (the backends' PeerInfo has these fields). */
export interface PeerLike {
  subnet: IPNet;
  publicIP: string;
  backendType: string;
  backendData: unknown;
}

/** What a peer is checked against (one address family). */
export interface GuardRules {
  /** The cluster network of the family (Network or IPv6Network). */
  network: IPNet;
  /** The prefix length every node subnet has. */
  subnetLen: number;
  /** Our own subnet of the family. */
  own: IPNet;
  /** Our own addresses of the family (public IP, interface address): never a peer's. */
  ownIPs: readonly string[];
}

const V4_ZERO_NET = IPNet.parse("0.0.0.0/8");
const V4_LOOPBACK = IPNet.parse("127.0.0.0/8");
const V4_LINK_LOCAL = IPNet.parse("169.254.0.0/16");
const V4_MULTICAST = IPNet.parse("224.0.0.0/4");
const V4_RESERVED = IPNet.parse("240.0.0.0/4"); // class E, 255.255.255.255 included
const V6_LINK_LOCAL = IPNet.parse("fe80::/10");
const V6_MULTICAST = IPNet.parse("ff00::/8");
const V6_V4MAPPED = IPNet.parse("::ffff:0:0/96");

/** Why `ip` cannot be a peer's underlay address of `family`, or null when it can (see the module doc). */
export function badPublicIP(ip: string, family: 4 | 6, linkLocalUnderlay: boolean): string | null {
  const a = IPAddr.tryParse(ip);
  return a ? badAddr(a, family, linkLocalUnderlay) : "is not an IP address";
}

function badAddr(a: IPAddr, family: 4 | 6, linkLocalUnderlay: boolean): string | null {
  if (a.family !== family) return `is not an IPv${family} address`;
  const ll = family === 4 ? V4_LINK_LOCAL : V6_LINK_LOCAL;
  if (ll.contains(a)) return linkLocalUnderlay ? null : "is link-local (our underlay address is not)";
  if (family === 4) {
    if (a.value === 0n) return "is unspecified";
    if (a.value === 0xffffffffn) return "is the broadcast address";
    if (V4_ZERO_NET.contains(a)) return "is in 0.0.0.0/8 (this network)";
    if (V4_LOOPBACK.contains(a)) return "is a loopback address";
    if (V4_MULTICAST.contains(a)) return "is a multicast address";
    if (V4_RESERVED.contains(a)) return "is in the reserved 240.0.0.0/4";
    return null;
  }
  if (a.value === 0n) return "is unspecified";
  if (a.value === 1n) return "is the loopback address";
  if (V6_MULTICAST.contains(a)) return "is a multicast address";
  if (V6_V4MAPPED.contains(a)) return "is an IPv4-mapped address";
  return null;
}

/** Why `mac` cannot be a VTEP's MAC, or null for a unicast, non-zero `aa:bb:cc:dd:ee:ff`. */
export function badVtepMac(mac: unknown): string | null {
  if (typeof mac !== "string" || !/^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/.test(mac)) {
    return "is missing or not a MAC";
  }
  if (/^(00:){5}00$/.test(mac)) return "is all zeros";
  if (parseInt(mac.slice(0, 2), 16) & 1) return "is a multicast/broadcast MAC";
  return null;
}

/** True when one of our addresses is link-local (then peers' link-local underlay addresses are fine). */
export function linkLocalUnderlay(ownIPs: readonly string[]): boolean {
  return ownIPs.some((ip) => {
    const a = IPAddr.tryParse(ip);
    return !!a && (a.family === 4 ? V4_LINK_LOCAL : V6_LINK_LOCAL).contains(a);
  });
}

/** What {@link checkPeer} derives from the rules once (a listing checks thousands of peers). */
interface Derived {
  linkLocal: boolean;
  own: IPAddr[];
}
const derived = new WeakMap<GuardRules, Derived>();

function derive(r: GuardRules): Derived {
  let d = derived.get(r);
  if (!d) {
    const own = r.ownIPs.map((ip) => IPAddr.tryParse(ip)).filter((a): a is IPAddr => a !== null);
    derived.set(r, d = { linkLocal: linkLocalUnderlay(r.ownIPs), own });
  }
  return d;
}

/** The reasons a peer is refused on its own (before conflicts with other peers), or null when it passes. */
export function checkPeer(p: PeerLike, r: GuardRules): Rejection | null {
  const fam = r.network.family;
  const s = p.subnet;
  if (s.family !== fam || !r.network.contains(s)) {
    return { reason: "outside_network", detail: `subnet ${s} is not inside the network ${r.network}` };
  }
  if (s.prefix !== r.subnetLen) {
    return {
      reason: "subnet_length",
      detail: `subnet ${s} is a /${s.prefix}; node subnets are /${r.subnetLen}`,
    };
  }
  if (s.overlaps(r.own)) {
    return { reason: "own_subnet", detail: `subnet ${s} is (or overlaps) our own subnet ${r.own}` };
  }
  if (p.publicIP === "") {
    const what = fam === 6 ? "no PublicIPv6: the node does not run IPv6" : "no PublicIP";
    return { reason: "public_ip", detail: `its lease has ${what}` };
  }
  const d = derive(r);
  const pub = IPAddr.tryParse(p.publicIP);
  const why = pub ? badAddr(pub, fam, d.linkLocal) : "is not an IP address";
  if (why || !pub) return { reason: "public_ip", detail: `PublicIP ${safeJson(p.publicIP)} ${why}` };
  if (d.own.some((a) => a.equals(pub))) {
    return {
      reason: "own_public_ip",
      detail: `PublicIP ${p.publicIP} is ours (a stale lease of this node?)`,
    };
  }
  if (r.network.contains(pub)) {
    return { reason: "public_ip", detail: `PublicIP ${p.publicIP} is inside the pod network ${r.network}` };
  }
  if (p.backendType === "vxlan") {
    const mac = vtepMacField(p.backendData);
    const bad = badVtepMac(mac);
    if (bad) {
      const shown = typeof mac === "string" ? mac.slice(0, 40) : typeof mac;
      return { reason: "vtep_mac", detail: `VtepMAC ${JSON.stringify(shown)} ${bad}` };
    }
  }
  if (p.backendType === "wireguard") {
    const key = wgPublicKeyField(p.backendData);
    const bad = badWgKey(key);
    if (bad) {
      const shown = typeof key === "string" ? key.slice(0, 44) : typeof key;
      return { reason: "public_key", detail: `PublicKey ${JSON.stringify(shown)} ${bad}` };
    }
  }
  return null;
}

/** A lease that claims a subnet: its store identity, its age order and its peer view. */
interface Candidate<P extends PeerLike> {
  peer: P;
  /** Smaller is older; leases without an age sort after those with one, then by id. */
  created: number;
  key: string;
  /** The refusal on its own, or null when it passes {@link checkPeer}. */
  bad: Rejection | null;
}

/** A candidate's verdict changed: `rejection` null means it is accepted now. */
export type VerdictListener<P extends PeerLike> = (id: string, peer: P, rejection: Rejection | null) => void;

/**
 * The peer leases of one family and which of them are accepted. Leases are known by their store identity
 * (`id`: the etcd/file key, or the kube Node), so two leases claiming one subnet are both kept: the older
 * (smaller `created`: etcd create revision, Node creationTimestamp, file store's first write; ties by id)
 * is accepted, the other refused as a `conflict` naming the winner, and accepted in its turn when the
 * winner goes. Accepted subnets all have the node prefix length and lie aligned in the Network, so two of
 * them overlap exactly when they are equal: grouping by subnet finds every overlap.
 */
export class PeerGuard<P extends PeerLike> {
  #rules: GuardRules;
  readonly #onVerdict: VerdictListener<P>;
  readonly #cands = new Map<string, Candidate<P>>();
  /**
   * Candidates passing {@link checkPeer}, by subnet key: one id (accepted), or the ids when several claim
   * the subnet, the accepted one first (no Map or Set per subnet: 5,000 peers are 5,000 entries).
   */
  readonly #groups = new Map<string, string | string[]>();
  /** The last refusal reported per id (accepted ones have none). */
  readonly #said = new Map<string, string>();

  constructor(rules: GuardRules, onVerdict: VerdictListener<P>) {
    this.#rules = rules;
    this.#onVerdict = onVerdict;
  }

  /** The rules in force. */
  get rules(): GuardRules {
    return this.#rules;
  }

  /** Number of leases known (accepted or not). */
  get leases(): number {
    return this.#cands.size;
  }

  /** Number of accepted peers. */
  get size(): number {
    return this.#groups.size;
  }

  /** The accepted peer of subnet `key`, if any. */
  accepted(key: string): P | undefined {
    const g = this.#groups.get(key);
    return g === undefined ? undefined : this.#cands.get(typeof g === "string" ? g : g[0])!.peer;
  }

  /** Every accepted peer, by subnet key. */
  *entries(): IterableIterator<[string, P]> {
    for (const [key, g] of this.#groups) yield [key, this.#cands.get(typeof g === "string" ? g : g[0])!.peer];
  }

  /** The subnet key lease `id` claims, if known. */
  keyOf(id: string): string | undefined {
    return this.#cands.get(id)?.key;
  }

  /** Adds or replaces lease `id`; returns the subnet keys whose accepted peer changed (or may have). */
  upsert(id: string, peer: P, created?: number): string[] {
    const old = this.#cands.get(id);
    if (old) this.#ungroup(id, old);
    const c: Candidate<P> = {
      peer,
      created: created ?? Number.POSITIVE_INFINITY,
      key: peer.subnet.toString(),
      bad: checkPeer(peer, this.#rules),
    };
    this.#cands.set(id, c);
    if (!c.bad) this.#group(id, c);
    else this.#say(id, c.peer, c.bad);
    const keys = old && old.key !== c.key ? [old.key, c.key] : [c.key];
    for (const k of keys) this.#elect(k);
    return keys;
  }

  /** Forgets lease `id`; returns the subnet keys whose accepted peer changed. */
  remove(id: string): string[] {
    const old = this.#cands.get(id);
    if (!old) return [];
    this.#cands.delete(id);
    this.#said.delete(id);
    this.#ungroup(id, old);
    this.#elect(old.key);
    return [old.key];
  }

  /** Replaces every lease (a full listing); unchanged verdicts are not reported again. */
  reset(leases: Iterable<{ id: string; peer: P; created?: number }>): void {
    const seen = new Set<string>();
    for (const l of leases) {
      seen.add(l.id);
      this.upsert(l.id, l.peer, l.created);
    }
    for (const id of [...this.#cands.keys()]) if (!seen.has(id)) this.remove(id);
  }

  /** New rules (our subnet changed): every lease is checked again. */
  setRules(r: GuardRules): void {
    this.#rules = r;
    const all = [...this.#cands].map(([id, c]) => ({ id, peer: c.peer, created: c.created }));
    this.#cands.clear();
    this.#groups.clear();
    this.reset(all);
  }

  #group(id: string, c: Candidate<P>): void {
    const g = this.#groups.get(c.key);
    if (g === undefined || g === id) this.#groups.set(c.key, id);
    else if (typeof g === "string") this.#groups.set(c.key, [g, id]);
    else if (!g.includes(id)) g.push(id);
  }

  #ungroup(id: string, c: Candidate<P>): void {
    const g = this.#groups.get(c.key);
    if (g === id) this.#groups.delete(c.key);
    else if (Array.isArray(g)) {
      const rest = g.filter((x) => x !== id);
      this.#groups.set(c.key, rest.length === 1 ? rest[0] : rest);
    }
  }

  /** Picks the accepted lease of `key` (the oldest) and reports the verdicts of the group. */
  #elect(key: string): void {
    const found = this.#groups.get(key);
    if (found === undefined) return;
    const g = typeof found === "string" ? [found] : found;
    let best: string | null = null;
    for (const id of g) {
      if (best === null) best = id;
      else {
        const a = this.#cands.get(id)!, b = this.#cands.get(best)!;
        if (a.created < b.created || (a.created === b.created && id < best)) best = id;
      }
    }
    if (Array.isArray(found) && found[0] !== best) {
      found.splice(found.indexOf(best!), 1);
      found.unshift(best!);
    }
    const w = this.#cands.get(best!)!;
    this.#say(best!, w.peer, null);
    for (const id of g) {
      if (id === best) continue;
      const c = this.#cands.get(id)!;
      this.#say(id, c.peer, {
        reason: "conflict",
        detail: `subnet ${key} is also claimed by ${best} (PublicIP ${w.peer.publicIP}), the older lease`,
      });
    }
  }

  /** Reports a verdict when it differs from the last one reported for `id`. */
  #say(id: string, peer: P, r: Rejection | null): void {
    const before = this.#said.get(id);
    if (!r) {
      if (before === undefined) return; // accepted, as it was (or first seen)
      this.#said.delete(id);
    } else {
      const text = `${r.reason}: ${r.detail}`;
      if (before === text) return;
      this.#said.set(id, text);
    }
    this.#onVerdict(id, peer, r);
  }
}

/** The logger shape the reporter writes to. */
export interface ReportLog {
  warn(msg: string, f?: Record<string, string | number | boolean | null | undefined>): void;
  info(msg: string, f?: Record<string, string | number | boolean | null | undefined>): void;
}

/**
 * Counts refused peers by reason and warns once per refusal, at most `burst` warnings per `windowMs`;
 * what is held back is counted and summed up in one line when the next window opens.
 */
export class RejectionReporter {
  readonly #log: ReportLog;
  readonly #count: (reason: RejectReason) => void;
  readonly #now: () => number;
  readonly #burst: number;
  readonly #windowMs: number;
  #windowStart = -Infinity;
  #inWindow = 0;
  #held = 0;

  constructor(o: {
    log: ReportLog;
    count: (reason: RejectReason) => void;
    now?: () => number;
    burst?: number;
    windowMs?: number;
  }) {
    this.#log = o.log;
    this.#count = o.count;
    this.#now = o.now ?? Date.now;
    this.#burst = o.burst ?? 20;
    this.#windowMs = o.windowMs ?? 60_000;
  }

  /** One refusal of the lease `id` (counted always; warned within the rate limit). */
  reject(id: string, r: Rejection, fields: Record<string, string | undefined> = {}): void {
    this.#count(r.reason);
    this.flush();
    if (this.#inWindow >= this.#burst) {
      this.#held++;
      return;
    }
    this.#inWindow++;
    this.#log.warn("skipping peer: its lease is refused, nothing is programmed for it", {
      lease: id,
      ...fields,
      reason: r.reason,
      detail: r.detail,
    });
  }

  /** Opens a new window when the last one is over, summing up the warnings it held back. */
  flush(): void {
    const t = this.#now();
    if (t - this.#windowStart < this.#windowMs) return;
    if (this.#held) {
      this.#log.warn("more peer leases refused (see flanctl_rejected_peers_total)", {
        not_logged: this.#held,
      });
    }
    this.#windowStart = t;
    this.#inWindow = 0;
    this.#held = 0;
  }
}
