/**
 * WireGuard backend checks (only when the network config says `wireguard`): the device of each family
 * (flannel-wg, flannel-wg-v6) present, up, addressed, MTU = underlay − 80 = FLANNEL_MTU, and how it is
 * driven (userspace: wireguard-go's TUN, a process holding it and a UAPI socket that answers; kernel: the
 * `wireguard` link kind, no process expected, generic netlink answering); our public key is the lease's;
 * every peer lease has its WireGuard peer with AllowedIPs = its subnet and Endpoint = its PublicIP:Port; and
 * the latest handshake of each peer. In the one-device modes (Mode auto, ipv4, ipv6) flannel-wg carries both
 * families: both our addresses on it, one peer per node with both its subnets, the endpoint the mode picks. The device is read the way its link kind says
 * (lib/backend/wireguard/read.ts: the UAPI socket /var/run/wireguard/<dev>.sock, or GET_DEVICE in the
 * checked namespace): no key material is kept or shown but public keys.
 * @module
 */
import type { Check, Finding } from "../types.ts";
import { ok } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { tunOwnerPids } from "../../os/mod.ts";
import { daemonRunning, daemonStatePath, readDaemonState } from "../../node/daemon_state.ts";
import { checkedNetns } from "../../observe/probes.ts";
import type { DeviceState, PeerState } from "../../backend/wireguard/uapi.ts";
import { readDevice, wayOfKind } from "../../backend/wireguard/read.ts";
import type { WgWayName } from "../../backend/wireguard/driver.ts";
import { oneDeviceMode, WG_DEVICE, WG_DEVICE_V6, WG_OVERHEAD } from "../../backend/wireguard/options.ts";
import { endpointOf, leasePort } from "../../backend/wireguard/backend.ts";
import { type KeyedSide, singleDevicePeers } from "../../backend/wireguard/single.ts";
import { wgPublicKeyField } from "../../lease/backend_data.ts";
import { errText } from "../../base/errors.ts";
import { safeJson } from "../../base/capped_read.ts";
import type { IPNet } from "../../base/cidr.ts";
import { tryIp } from "../../base/cidr.ts";

/** No handshake this long after the device started (with traffic sent) is critical. */
export const HANDSHAKE_GRACE_S = 120;

const RESTART = "restart the daemon (it makes the WireGuard device, the kernel's or wireguard-go's, and " +
  "configures it), e.g. systemctl restart flanctl";

function isWg(ctx: NodeSnapshot): boolean {
  return ctx.backendType === "wireguard";
}

/** One family's device, its port and what the store says of it. */
interface Plane {
  family: 4 | 6;
  dev: string;
  port: number;
  own: IPNet | null;
}

function pickPort(ctx: NodeSnapshot, key: string, dflt: number): number {
  const raw = ctx.store.config?.backend.raw ?? {};
  const k = Object.keys(raw).find((x) => x.toLowerCase() === key.toLowerCase());
  const v = k === undefined ? undefined : raw[k];
  return typeof v === "number" && Number.isInteger(v) && v > 0 && v < 65536 ? v : dflt;
}

/** The net-conf's one-device mode (auto, ipv4, ipv6: flannel-wg for both families), or null (separate). */
export function singleMode(ctx: NodeSnapshot): "auto" | "ipv4" | "ipv6" | null {
  return oneDeviceMode(ctx.store.config?.backend.raw ?? {});
}

function planes(ctx: NodeSnapshot): Plane[] {
  const cfg = ctx.store.config;
  const own = ctx.ownLease();
  const one = singleMode(ctx) !== null;
  const out: Plane[] = [];
  if (!cfg || cfg.enableIPv4) {
    out.push({ family: 4, dev: WG_DEVICE, port: pickPort(ctx, "ListenPort", 51820), own: ctx.nodeSubnet });
  }
  if (cfg?.enableIPv6) {
    out.push({
      family: 6,
      dev: one ? WG_DEVICE : WG_DEVICE_V6,
      port: one ? pickPort(ctx, "ListenPort", 51820) : pickPort(ctx, "ListenPortV6", 51821),
      own: ctx.subnetEnv?.ipv6Subnet?.net ?? own?.ipv6Subnet ?? null,
    });
  }
  return out;
}

/** The planes with one per device (the one-device modes: the first family's). */
function devicePlanes(ctx: NodeSnapshot): Plane[] {
  return planes(ctx).filter((pl, i, all) => all.findIndex((x) => x.dev === pl.dev) === i);
}

/** The state of each plane's device, read once per snapshot. */
const states = new WeakMap<NodeSnapshot, Map<string, Promise<DeviceState | string>>>();

/** How a device is read: `way` from its link kind (a device of neither kind is tried over the UAPI). */
export type WgReader = (dev: string, way: WgWayName) => Promise<DeviceState>;
const readers = new WeakMap<NodeSnapshot, WgReader>();

/** Reads the devices of `ctx` with `read` (tests: a fake kernel or socket). */
export function useWgReader(ctx: NodeSnapshot, read: WgReader): void {
  readers.set(ctx, read);
}

/** The way `dev` is driven, from its link kind: userspace (tun), kernel (wireguard), else null. */
function wayOf(ctx: NodeSnapshot, dev: string): WgWayName | null {
  return wayOfKind(ctx.link(dev)?.kind);
}

/** The device's state, read the way its link kind says, or why it could not be read. */
export function deviceState(ctx: NodeSnapshot, dev: string): Promise<DeviceState | string> {
  let m = states.get(ctx);
  if (!m) states.set(ctx, m = new Map());
  let p = m.get(dev);
  if (!p) {
    const way = wayOf(ctx, dev) ?? "userspace";
    const read: WgReader = readers.get(ctx) ??
      ((d, w) =>
        readDevice(d, w, {
          socketDir: ctx.opts.wgSocketDir,
          ns: ctx.opts.netns === null ? null : { name: ctx.opts.netns },
        }));
    p = read(dev, way).catch((e) => errText(e));
    m.set(dev, p);
  }
  return p;
}

/** Seconds since process `pid` started (from /proc), or null. */
function processAge(pid: number): number | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const start = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
    const up = Number(Deno.readTextFileSync("/proc/uptime").split(" ")[0]);
    return Math.max(0, up - start / 100); // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

/**
 * Seconds the daemon of this node has run (its state file's startedAt), or null when there is none or it
 * is not running: then a missing handshake is judged without a grace.
 */
export function daemonAge(ctx: NodeSnapshot, nowS: number): number | null {
  try {
    const st = readDaemonState(daemonStatePath(ctx.opts.subnetFile));
    if (!st || daemonRunning(st) === false) return null;
    const t = Date.parse(st.startedAt);
    return Number.isFinite(t) ? Math.max(0, nowS - t / 1000) : null;
  } catch {
    return null;
  }
}

function programOf(pid: number): string {
  try {
    return Deno.readLinkSync(`/proc/${pid}/exe`).split("/").pop() ?? "?";
  } catch {
    return "?";
  }
}

/** wg-device: each family's device present, up, addressed, MTU chain, driven by a live UAPI. */
export const wgDevice: Check = {
  id: "wg-device",
  title: "WireGuard device present, up, addressed, MTU, answering (userspace: UAPI; kernel: generic netlink)",
  async run(ctx): Promise<Finding[]> {
    if (!isWg(ctx)) return [];
    const out: Finding[] = [];
    for (const pl of devicePlanes(ctx)) {
      const dev = ctx.link(pl.dev);
      if (!dev) {
        out.push({
          id: "wg-device",
          severity: "critical",
          detail: `${pl.dev} does not exist`,
          why: "no encrypted overlay: pods on this node cannot reach pods on other nodes",
          fix: [RESTART],
        });
        continue;
      }
      const problems: string[] = [];
      const fix: string[] = [];
      let way: string;
      if (dev.kind === "tun") {
        const pids = tunOwnerPids(pl.dev, checkedNetns(ctx));
        way = pids.length
          ? `userspace (${programOf(pids[0])} pid ${pids.join(",")})`
          : "userspace (no process)";
        if (!pids.length) problems.push(`no process holds ${pl.dev} open (wireguard-go is gone)`);
      } else if (dev.kind === "wireguard") {
        way = "kernel"; // the module's device: no process to look for
      } else {
        way = "none";
        problems.push(`${pl.dev} is a ${dev.kind ?? "physical"} device, not WireGuard`);
      }
      const st = await deviceState(ctx, pl.dev);
      if (typeof st === "string") {
        problems.push(
          dev.kind === "wireguard"
            ? `generic netlink does not answer for it: ${st}`
            : `its UAPI socket does not answer: ${st}`,
        );
      }
      if (!dev.up) {
        problems.push(`${pl.dev} is down`);
        fix.push(ctx.cmd(`ip link set ${pl.dev} up`));
      }
      const fams = planes(ctx).filter((x) => x.dev === pl.dev); // one device: both families' addresses
      for (const f of fams) {
        if (!f.own) continue;
        const want = `${f.own.ip}/${f.family === 6 ? 128 : 32}`;
        const addrs = (ctx.kernel?.addrs ?? []).filter((a) =>
          a.index === dev.index && a.family === f.family && !a.local.startsWith("fe80:")
        );
        if (!addrs.some((a) => `${a.local}/${a.prefix}` === want)) {
          problems.push(
            `${pl.dev} has ${
              addrs.map((a) => `${a.local}/${a.prefix}`).join(", ") || "no address"
            }, expected ${want}`,
          );
        }
      }
      const envMtu = ctx.subnetEnv?.mtu;
      if (envMtu !== undefined && envMtu !== null && envMtu !== dev.mtu) {
        problems.push(`${pl.dev} MTU ${dev.mtu} != FLANNEL_MTU ${envMtu}`);
      }
      const pub = pl.family === 6 ? ctx.ownLease()?.attrs.PublicIPv6 : ctx.ownLease()?.attrs.PublicIP;
      const under = pub ? (ctx.kernel?.addrs ?? []).find((a) => a.local === pub) : undefined;
      const ul = under ? ctx.link(under.index) : null;
      if (ul && !ctx.store.config?.backend.raw["MTU"] && ul.mtu - WG_OVERHEAD !== dev.mtu) {
        problems.push(`${pl.dev} MTU ${dev.mtu} != ${ul.name} MTU ${ul.mtu} − ${WG_OVERHEAD}`);
        fix.push(RESTART + " (it sets the MTU from the interface)");
      }
      if (!problems.length) {
        const owns = fams.map((f) => f.own ? f.own.ip.toString() : "?").join(" and ");
        out.push(ok("wg-device", `${pl.dev} up, ${owns}, MTU ${dev.mtu}, ${way}`));
        continue;
      }
      out.push({
        id: "wg-device",
        severity: "critical",
        detail: `${way}: ${problems.join("; ")}`,
        why: "every packet to another node's pods goes through this device; without its program or " +
          "configuration they are dropped, and an MTU above underlay − 80 makes large packets vanish",
        fix: fix.length ? [...new Set(fix)] : [RESTART],
      });
    }
    return out;
  },
};

/** wg-key: the device's public key and port are the ones our lease announces. */
export const wgKey: Check = {
  id: "wg-key",
  title: "WireGuard public key and port equal to our lease's",
  async run(ctx): Promise<Finding[]> {
    if (!isWg(ctx)) return [];
    const lease = ctx.ownLease();
    if (!lease) return [];
    const out: Finding[] = [];
    for (const pl of planes(ctx)) {
      const st = await deviceState(ctx, pl.dev);
      if (typeof st === "string") continue; // wg-device says it
      const data = pl.family === 6 ? lease.attrs.BackendV6Data : lease.attrs.BackendData;
      const want = wgPublicKeyField(data);
      const port = leasePort(data) || pl.port;
      const problems: string[] = [];
      if (st.publicKey !== want) {
        problems.push(
          `${pl.dev}'s public key ${st.publicKey ?? "(none)"} is not the lease's ${safeJson(want, 60)}`,
        );
      }
      if (st.listenPort !== port) {
        problems.push(`${pl.dev} listens on ${st.listenPort}, the lease says ${port}`);
      }
      out.push(
        problems.length
          ? {
            id: "wg-key",
            severity: "critical",
            detail: problems.join("; "),
            why: "peers encrypt to the key and port our lease announces: with another key or port no " +
              "handshake completes and no packet arrives",
            fix: [RESTART + " (it sets the key file's key and writes it into the lease)"],
          }
          : ok("wg-key", `${pl.dev}: public key ${st.publicKey}, port ${st.listenPort}, as the lease says`),
      );
    }
    return out;
  },
};

/** A peer lease's WireGuard peer as the device should have it. */
interface WantPeer {
  key: string;
  /** AllowedIPs, comma-joined (one subnet; both in the one-device modes). */
  subnet: string;
  endpoint: string;
}

/** One family's peer leases as WireGuard sides (the first lease of a key wins, as the daemon). */
function sides(ctx: NodeSnapshot, pl: Plane): KeyedSide[] {
  const own = ctx.ownLease();
  const out = new Map<string, KeyedSide>();
  const leases = pl.family === 4 ? ctx.peerLeases() : ctx.store.leases.filter((l) => l !== own);
  for (const l of leases) {
    if (l.attrs.BackendType !== "wireguard") continue;
    const subnet = pl.family === 6 ? l.ipv6Subnet : l.subnet;
    const data = pl.family === 6 ? l.attrs.BackendV6Data : l.attrs.BackendData;
    const ip = tryIp(pl.family === 6 ? l.attrs.PublicIPv6 : l.attrs.PublicIP);
    const key = wgPublicKeyField(data);
    if (!subnet || !ip || typeof key !== "string" || (pl.own && subnet.equals(pl.own))) continue;
    if (out.has(key)) continue;
    out.set(key, {
      publicKey: key,
      subnet: subnet.toString(),
      publicIP: ip.toString(),
      endpoint: endpointOf(ip.toString(), leasePort(data) || pl.port),
    });
  }
  return [...out.values()];
}

/** The peers each device should have: per family (separate), or flannel-wg's of both (one device). */
function wantPeers(ctx: NodeSnapshot): { pl: Plane; want: WantPeer[] }[] {
  const mode = singleMode(ctx);
  const all = planes(ctx);
  if (mode === null) {
    return all.map((pl) => ({
      pl,
      want: sides(ctx, pl).map((s) => ({ key: s.publicKey, subnet: s.subnet, endpoint: s.endpoint })),
    }));
  }
  if (!all.length) return [];
  const of = (f: 4 | 6) => {
    const pl = all.find((x) => x.family === f);
    return pl ? sides(ctx, pl) : [];
  };
  const own = ctx.ownLease()?.attrs;
  const peers = singleDevicePeers(of(4), of(6), {
    mode,
    our4: own?.PublicIP || null,
    our6: own?.PublicIPv6 || null,
    pskHex: "",
    keepalive: 0,
  });
  return [{
    pl: all[0],
    want: peers.map((p) => ({ key: p.publicKey, subnet: p.allowedIPs!.join(","), endpoint: p.endpoint! })),
  }];
}

/** wg-peers: every peer lease has its peer with the right AllowedIPs and Endpoint; no stray peers. */
export const wgPeers: Check = {
  id: "wg-peers",
  title: "A WireGuard peer per peer lease: AllowedIPs = its subnet, Endpoint = its PublicIP:Port",
  async run(ctx): Promise<Finding[]> {
    if (!isWg(ctx)) return [];
    const out: Finding[] = [];
    for (const { pl, want } of wantPeers(ctx)) {
      const st = await deviceState(ctx, pl.dev);
      if (typeof st === "string") continue;
      const have = new Map(st.peers.map((p) => [p.publicKey, p]));
      const problems: string[] = [];
      for (const w of want) {
        const p = have.get(w.key);
        have.delete(w.key);
        if (!p) problems.push(`no peer for ${w.subnet} (key ${w.key.slice(0, 8)}…)`);
        else if (p.allowedIPs.join(",") !== w.subnet) {
          problems.push(`${w.subnet}'s peer allows ${p.allowedIPs.join(",") || "nothing"}`);
        } else if (p.endpoint !== w.endpoint) {
          problems.push(
            `${w.subnet}'s peer has endpoint ${p.endpoint ?? "none"}, the lease says ${w.endpoint}`,
          );
        }
      }
      for (const p of have.values()) {
        problems.push(`peer ${p.publicKey.slice(0, 8)}… (${p.allowedIPs.join(",")}) holds no lease`);
      }
      out.push(
        problems.length
          ? {
            id: "wg-peers",
            severity: problems.some((x) => x.startsWith("no peer") || x.includes("allows"))
              ? "critical"
              : "warning",
            detail: `${pl.dev}: ${problems.slice(0, 10).join("; ")}${problems.length > 10 ? "; …" : ""}`,
            why:
              "a subnet without its peer (or with another's AllowedIPs) is unreachable; a stray peer may " +
              "still receive what was meant for a node that left",
            fix: [RESTART + " (its first reconcile makes the peers what the leases say)"],
          }
          : ok("wg-peers", `${pl.dev}: ${want.length} peers, AllowedIPs and endpoints as the leases say`),
      );
    }
    return out;
  },
};

/**
 * A peer's handshake verdict: none at all, with traffic sent, HANDSHAKE_GRACE_S after the device started is
 * critical; an old one while keepalives are on is a warning; none while idle is fine.
 */
export function judgeHandshake(
  p: PeerState,
  nowS: number,
  deviceAgeS: number | null,
): { severity: "ok" | "warning" | "critical"; text: string } {
  const tried = p.txBytes > 0 || p.keepalive > 0;
  if (p.lastHandshake === 0) {
    if (tried && (deviceAgeS === null || deviceAgeS >= HANDSHAKE_GRACE_S)) {
      return { severity: "critical", text: `no handshake, ${p.txBytes} bytes sent` };
    }
    return { severity: "ok", text: tried ? "no handshake yet" : "no handshake (idle)" };
  }
  const age = Math.max(0, Math.round(nowS - p.lastHandshake));
  if (p.keepalive > 0 && age > 3 * HANDSHAKE_GRACE_S) {
    return { severity: "warning", text: `last handshake ${age} s ago despite keepalives` };
  }
  return { severity: "ok", text: `last handshake ${age} s ago` };
}

/** wg-handshake: the latest handshake of each peer. */
export const wgHandshake: Check = {
  id: "wg-handshake",
  title: "WireGuard handshakes: none after 2 minutes of trying is critical",
  async run(ctx): Promise<Finding[]> {
    if (!isWg(ctx)) return [];
    const out: Finding[] = [];
    const now = Date.now() / 1000;
    for (const pl of devicePlanes(ctx)) {
      const st = await deviceState(ctx, pl.dev);
      if (typeof st === "string") continue;
      // wireguard-go's age stands for the device's; a kernel device has no process: the daemon that keeps
      // its peers stands for it (no handshake in 2 minutes of it running is as critical).
      const pids = wayOf(ctx, pl.dev) === "userspace" ? tunOwnerPids(pl.dev, checkedNetns(ctx)) : [];
      const age = pids.length
        ? processAge(pids[0])
        : wayOf(ctx, pl.dev) === "kernel"
        ? daemonAge(ctx, now)
        : null;
      const verdicts = st.peers.map((p) => ({ p, v: judgeHandshake(p, now, age) }));
      const bad = verdicts.filter((x) => x.v.severity !== "ok");
      if (!bad.length) {
        const done = verdicts.filter((x) => x.p.lastHandshake > 0).length;
        out.push(ok("wg-handshake", `${pl.dev}: ${done} of ${st.peers.length} peers have a handshake`));
        continue;
      }
      const crit = bad.some((x) => x.v.severity === "critical");
      out.push({
        id: "wg-handshake",
        severity: crit ? "critical" : "warning",
        detail: `${pl.dev}: ` +
          bad.slice(0, 10).map((x) =>
            `${x.p.allowedIPs.join(",") || x.p.publicKey.slice(0, 8)} (${
              x.p.endpoint ?? "no endpoint"
            }): ${x.v.text}`
          ).join("; "),
        why: "no handshake means no session: nothing reaches that node's pods. Likely: UDP " +
          `${pl.port} blocked between the nodes (a firewall, a security group), the peer's key not the one ` +
          "its lease says (a key file replaced without a restart), or a clock far off (handshakes carry a " +
          "timestamp)",
        fix: [
          `on both nodes: flanctl doctor --check wg-key; and let UDP ${pl.port} through between them`,
          ctx.cmd(`ping -c 3 <peer's PublicIP>`) + " (the underlay path)",
        ],
      });
    }
    return out;
  },
};

/** The wireguard backend's checks. */
export const WG_CHECKS: Check[] = [wgDevice, wgKey, wgPeers, wgHandshake];
