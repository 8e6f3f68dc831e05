/**
 * Veth pairing across network namespaces. A veth's IFLA_LINK is its peer's ifindex *in the peer's
 * namespace*, and IFLA_LINK_NETNSID is the id (local to the veth's namespace) of that namespace. ifindexes
 * repeat across namespaces, so ends are keyed by (namespace, ifindex); nsids are turned into namespaces
 * exactly by asking each namespace for the id it gives every other one (RTM_GETNSID with NETNSA_FD).
 * @module
 */
import { closeFd, listNamedNetns, netnsIdentity, nsidOf, openNetlink, openNetnsFd } from "../netlink/mod.ts";
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
  for (const name of listNamedNetns()) add({ name }, name, `/var/run/netns/${name}`);
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
  let want = opts.netns;
  if (want !== undefined && want !== null) {
    // Throws NetnsNotFoundError naming it when missing; a name that is another name's (or our) namespace
    // is matched by identity.
    closeFd(openNetnsFd({ name: want }));
    const id = netnsIdentity(`/var/run/netns/${want}`);
    const hit = spaces.find((s) => s.id === id);
    if (hit) want = hit.label;
  }
  const states: (NsState | null)[] = spaces.map((ns) => {
    let handle: NetlinkHandle;
    try {
      handle = openNetlink(ns.ref);
    } catch {
      return null; // the process went away, or a stale netns file
    }
    try {
      return { ns, handle, veths: handle.links().filter((l) => l.kind === "veth") };
    } catch {
      handle.close();
      return null;
    }
  });
  try {
    const nsidMap = (i: number): Map<number, number> => {
      const st = states[i]!;
      if (st.nsids) return st.nsids;
      const m = new Map<number, number>();
      for (let j = 0; j < spaces.length; j++) {
        if (!states[j]) continue;
        const path = spaces[j].ref === null ? { path: "/proc/thread-self/ns/net" } : spaces[j].ref!;
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
    };
    const pairs: VethPair[] = [];
    const done = new Set<string>();
    for (let i = 0; i < states.length; i++) {
      const st = states[i];
      if (!st) continue;
      for (const v of st.veths) {
        const key = `${i}/${v.index}`;
        if (done.has(key)) continue;
        done.add(key);
        if (v.parent === null) continue;
        let j: number | undefined = i;
        if (v.linkNetnsId !== null) j = nsidMap(i).get(v.linkNetnsId);
        const peerLink = j !== undefined ? states[j]?.veths.find((l) => l.index === v.parent) : undefined;
        if (j !== undefined && peerLink) done.add(`${j}/${peerLink.index}`);
        const pair: VethPair = {
          name: v.name,
          ifindex: v.index,
          netns: st.ns.label,
          peer: {
            name: peerLink?.name ?? null,
            ifindex: v.parent,
            netns: j !== undefined ? spaces[j].label : `nsid:${v.linkNetnsId}`,
          },
        };
        if (want !== undefined) {
          if (pair.netns === want) pairs.push(pair);
          else if (pair.peer.netns === want && pair.peer.name !== null) {
            pairs.push({
              name: pair.peer.name,
              ifindex: pair.peer.ifindex,
              netns: pair.peer.netns,
              peer: { name: pair.name, ifindex: pair.ifindex, netns: pair.netns },
            });
          }
        } else pairs.push(pair);
      }
    }
    return pairs;
  } finally {
    for (const s of states) s?.handle.close();
  }
}
