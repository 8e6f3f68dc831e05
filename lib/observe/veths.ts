/**
 * Veth pairing across network namespaces. A veth's IFLA_LINK is its peer's ifindex *in the peer's
 * namespace*, and IFLA_LINK_NETNSID is the id (local to the veth's namespace) of that namespace. ifindexes
 * repeat across namespaces, so ends are keyed by (namespace, ifindex); nsids are turned into namespaces
 * exactly by asking each namespace for the id it gives every other one (RTM_GETNSID with NETNSA_FD).
 * @module
 */
import { nsidOf, openNetlink } from "../netlink/mod.ts";
import { closeFd, listNamedNetns, netnsIdentity, netnsPath, openNetnsFd } from "../os/mod.ts";
import type { LinkInfo, NetlinkHandle, NetnsRef } from "../netlink/types.ts";

/** One end of a veth pair. `netns`: a netns name, "pid:PID" for an unnamed one, null for ours. */
export interface VethEnd {
  name: string;
  ifindex: number;
  netns: string | null;
}

/** A veth and its peer (`inspect veths -o json` prints a list of these). */
export interface VethPair extends VethEnd {
  /** The other end; `name` is null when the peer's namespace could not be found (label `nsid:N`). */
  peer: { name: string | null; ifindex: number; netns: string | null };
}

/** A network namespace found on the host. */
export interface HostNetns {
  /** How to open it. null: the namespace this process runs in. */
  ref: NetnsRef | null;
  /** name, "pid:PID", or null for ours. */
  label: string | null;
  /** `dev:ino` of its nsfs file. */
  id: string;
}

/**
 * Every distinct network namespace on the host: ours first, then the named ones (sorted), then those
 * only reachable through /proc/PID/ns/net (lowest pid), deduplicated by nsfs identity.
 */
export function listHostNetns(): HostNetns[] {
  const out: HostNetns[] = [];
  const seen = new Set<string>();
  const add = (ref: NetnsRef | null, label: string | null, path: string) => {
    const id = netnsIdentity(path);
    if (id === null || seen.has(id)) return;
    seen.add(id);
    out.push({ ref, label, id });
  };
  add(null, null, "/proc/thread-self/ns/net");
  for (const name of listNamedNetns()) add({ name }, name, netnsPath({ name }));
  const pids: number[] = [];
  try {
    for (const e of Deno.readDirSync("/proc")) if (/^\d+$/.test(e.name)) pids.push(Number(e.name));
  } catch { /* no /proc */ }
  for (const pid of pids.sort((a, b) => a - b)) add({ pid }, `pid:${pid}`, `/proc/${pid}/ns/net`);
  return out;
}

interface NsState {
  ns: HostNetns;
  veths: LinkInfo[];
  handle: NetlinkHandle;
  /** nsid (as this namespace sees it) → index into the namespace list; filled on demand. */
  nsids?: Map<number, number>;
}

/**
 * Pairs every veth on the host. Each pair is listed once, oriented with the end in the earlier namespace
 * of {@link listHostNetns} first (ours, then named, then pid ones). With `netns`, only pairs with an end
 * in that namespace, oriented with that end first.
 */
export function listVethPairs(opts: { netns?: string | null } = {}): VethPair[] {
  const spaces = listHostNetns();
  const want = wantedLabel(spaces, opts.netns);
  const states = spaces.map(openSpace);
  try {
    const pairs: VethPair[] = [];
    /** Ends already listed, as `namespace index/ifindex`. */
    const done = new Set<string>();
    for (let i = 0; i < states.length; i++) {
      for (const v of states[i]?.veths ?? []) {
        const pair = pairOf(states, i, v, done);
        const shown = pair && want !== undefined ? oriented(pair, want) : pair;
        if (shown) pairs.push(shown);
      }
    }
    return pairs;
  } finally {
    for (const s of states) s?.handle.close();
  }
}

/**
 * The label of namespace `netns` as {@link listHostNetns} names it (undefined: every namespace). Throws
 * NetnsNotFoundError naming it when missing; a name that is another name's (or our) namespace is matched
 * by identity.
 */
function wantedLabel(spaces: HostNetns[], netns: string | null | undefined): string | null | undefined {
  if (netns === undefined || netns === null) return netns;
  closeFd(openNetnsFd({ name: netns }));
  const id = netnsIdentity(netnsPath({ name: netns }));
  const hit = spaces.find((s) => s.id === id);
  return hit ? hit.label : netns;
}

/** A namespace's netlink handle and veths; null when it went away (the process, or a stale netns file). */
function openSpace(ns: HostNetns): NsState | null {
  let handle: NetlinkHandle;
  try {
    handle = openNetlink(ns.ref);
  } catch {
    return null;
  }
  try {
    return { ns, handle, veths: handle.links().filter((l) => l.kind === "veth") };
  } catch {
    handle.close();
    return null;
  }
}

/**
 * Veth `v` of namespace `i` and its peer, or null when it was already listed (as a peer) or has no
 * peer index. Marks both ends done.
 */
function pairOf(states: (NsState | null)[], i: number, v: LinkInfo, done: Set<string>): VethPair | null {
  const key = `${i}/${v.index}`;
  if (done.has(key)) return null;
  done.add(key);
  if (v.parent === null) return null;
  let j: number | undefined = i;
  if (v.linkNetnsId !== null) j = nsidMap(states, i).get(v.linkNetnsId);
  const peerLink = j !== undefined ? states[j]?.veths.find((l) => l.index === v.parent) : undefined;
  if (j !== undefined && peerLink) done.add(`${j}/${peerLink.index}`);
  return {
    name: v.name,
    ifindex: v.index,
    netns: states[i]!.ns.label,
    peer: {
      name: peerLink?.name ?? null,
      ifindex: v.parent,
      netns: j !== undefined ? states[j]!.ns.label : `nsid:${v.linkNetnsId}`,
    },
  };
}

/**
 * The nsids namespace `i` gives the others (RTM_GETNSID with each one's fd) → their index; asked once
 * per namespace, on demand.
 */
function nsidMap(states: (NsState | null)[], i: number): Map<number, number> {
  const st = states[i]!;
  if (st.nsids) return st.nsids;
  const m = new Map<number, number>();
  for (let j = 0; j < states.length; j++) {
    const other = states[j];
    if (!other) continue;
    const path = other.ns.ref === null ? { path: "/proc/thread-self/ns/net" } : other.ns.ref;
    let fd = -1;
    try {
      fd = openNetnsFd(path);
      const id = nsidOf(st.handle, fd);
      if (id !== null && !m.has(id)) m.set(id, j);
    } catch {
      /* namespace vanished */
    } finally {
      closeFd(fd);
    }
  }
  return st.nsids = m;
}

/** `pair` with its end in namespace `want` first, or null when neither (readable) end is there. */
function oriented(pair: VethPair, want: string | null): VethPair | null {
  if (pair.netns === want) return pair;
  if (pair.peer.netns !== want || pair.peer.name === null) return null;
  return {
    name: pair.peer.name,
    ifindex: pair.peer.ifindex,
    netns: pair.peer.netns,
    peer: { name: pair.name, ifindex: pair.ifindex, netns: pair.netns },
  };
}
