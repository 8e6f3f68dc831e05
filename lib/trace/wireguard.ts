/**
 * The wireguard backend's hops of the IPv4 walk: flannel-wg on the source (the doctor's wg-device finding,
 * plus the pod MTU fitting it), the WireGuard peer the packet is encrypted to (the lease's PublicKey:
 * AllowedIPs holding the destination's subnet, its endpoint, the latest handshake), and flannel-wg on the
 * remote node, where the packet is decrypted and enters the kernel. In the one-device modes (Mode auto,
 * ipv4, ipv6) both walks go through flannel-wg, to the endpoint the mode picks (IPv4 or IPv6, whatever the
 * packet's family).
 * @module
 */
import type { Lease } from "../store/types.ts";
import { deviceOf } from "./hops.ts";
import { doctorText, type Path } from "./path.ts";
import type { TraceNode } from "./types.ts";
import { overlayDeviceHop } from "./device_hop.ts";
import { judgeHandshake, wgDevice, wgDeviceState } from "../doctor/mod.ts";
import { oneDeviceMode, WG_DEVICE, WG_DEVICE_V6 } from "../backend/wireguard/options.ts";
import { endpointOf, leasePort } from "../backend/wireguard/backend.ts";
import { singleDevicePeers } from "../backend/wireguard/single.ts";
import type { NodeSnapshot } from "../observe/snapshot.ts";
import { wgPublicKeyField } from "../lease/backend_data.ts";
import { safeJson } from "../base/capped_read.ts";

/** The device that carries an address family on the node of `ctx` (flannel-wg for both in one-device modes). */
export function wgDevOf(ctx: NodeSnapshot, family: 4 | 6): string {
  return family === 6 && !oneDeviceMode(ctx.store.config?.backend.raw ?? {}) ? WG_DEVICE_V6 : WG_DEVICE;
}

/**
 * The endpoint the source node's device should have for `lease`'s peer (its port: the lease's, else the
 * device's `listenPort`), and its IP: the family's PublicIP, or in the one-device modes the one the mode picks.
 */
function endpointFor(
  ctx: NodeSnapshot,
  lease: Lease,
  family: 4 | 6,
  listenPort: number,
): { ip: string; endpoint: string } {
  const side = (f: 4 | 6) => {
    const data = f === 6 ? lease.attrs.BackendV6Data : lease.attrs.BackendData;
    const ip = (f === 6 ? lease.attrs.PublicIPv6 : lease.attrs.PublicIP) ?? "";
    const subnet = f === 6 ? lease.ipv6Subnet : lease.subnet;
    return {
      publicKey: "k",
      subnet: String(subnet),
      publicIP: ip,
      endpoint: endpointOf(ip, leasePort(data) || listenPort),
    };
  };
  const mode = oneDeviceMode(ctx.store.config?.backend.raw ?? {});
  if (!mode) return { ip: side(family).publicIP, endpoint: side(family).endpoint };
  const cfg = ctx.store.config;
  const v4 = cfg && !cfg.enableIPv4 || !lease.subnet || !lease.attrs.PublicIP ? [] : [side(4)];
  const v6 = !cfg?.enableIPv6 || !lease.ipv6Subnet || !lease.attrs.PublicIPv6 ? [] : [side(6)];
  if (!v4.length && !v6.length) return { ip: side(family).publicIP, endpoint: side(family).endpoint };
  const own = ctx.ownLease()?.attrs;
  const [peer] = singleDevicePeers(v4, v6, {
    mode,
    our4: own?.PublicIP || null,
    our6: own?.PublicIPv6 || null,
    pskHex: "",
    keepalive: 0,
  });
  const endpoint = peer.endpoint!;
  return { ip: [...v4, ...v6].find((x) => x.endpoint === endpoint)!.publicIP, endpoint };
}

/**
 * flannel-wg (flannel-wg-v6) on `n`: the doctor's wg-device finding for it, plus the pod MTU fitting it.
 * Returns whether it is ok.
 */
export async function wgDeviceHop(
  n: TraceNode,
  step: string,
  podMtu: number | null,
  p: Path,
  family: 4 | 6 = 4,
): Promise<boolean> {
  const WG = wgDevOf(n.ctx, family);
  const mine = (d: string) => d.includes(`${WG} `) || d.includes(`${WG}:`) || d.endsWith(WG);
  const f = (await wgDevice.run(n.ctx)).find((x) => mine(x.detail));
  return await overlayDeviceHop(n, step, podMtu, p, WG, "wg-device", f);
}

/**
 * The source node's WireGuard hops: flannel-wg, then the peer the lease's PublicKey names. Returns the IP
 * the packet leaves for, encrypted (the endpoint's), or null when a hop is broken.
 */
export async function wgOverlay(
  n: TraceNode,
  lease: Lease,
  leaseText: string,
  podMtu: number | null,
  p: Path,
  family: 4 | 6 = 4,
): Promise<string | null> {
  const WG = wgDevOf(n.ctx, family);
  if (!await wgDeviceHop(n, "wg-device", podMtu, p, family)) return null;
  p.dev(n.netns, WG, "tx");
  const data = family === 6 ? lease.attrs.BackendV6Data : lease.attrs.BackendData;
  const key = wgPublicKeyField(data);
  const st = await wgDeviceState(n.ctx, WG);
  const peer = typeof st === "string" || typeof key !== "string"
    ? null
    : st.peers.find((x) => x.publicKey === key) ?? null;
  const sub = String(family === 6 ? lease.ipv6Subnet : lease.subnet);
  const to = endpointFor(n.ctx, lease, family, typeof st === "string" ? 0 : st.listenPort);
  const want = to.endpoint;
  const hs = peer ? judgeHandshake(peer, Date.now() / 1000, null) : null;
  const problems: string[] = [];
  if (typeof st === "string") problems.push(`the device's UAPI does not answer: ${st}`);
  else if (lease.attrs.BackendType !== "wireguard") {
    problems.push(`the peer's lease has BackendType ${safeJson(lease.attrs.BackendType)}, not wireguard`);
  } else if (!peer) problems.push(`no WireGuard peer with the lease's PublicKey ${safeJson(key, 60)}`);
  else {
    if (!peer.allowedIPs.includes(sub)) {
      problems.push(
        `the peer allows ${peer.allowedIPs.join(",") || "nothing"}, not ${sub}: the packet is dropped`,
      );
    }
    if (peer.endpoint !== want) problems.push(`endpoint ${peer.endpoint ?? "none"}, the lease says ${want}`);
    if (hs?.severity === "critical") problems.push(hs.text);
  }
  const ok = !problems.length;
  p.add({
    node: n.name,
    step: "wg-peer",
    ok,
    entry: peer
      ? `peer ${peer.publicKey} allowed-ips ${peer.allowedIPs.join(",")} endpoint ${peer.endpoint ?? "-"}; ` +
        (hs?.text ?? "")
      : `${sub} → ${want} (PublicKey ${safeJson(key, 60)})`,
    detail: ok
      ? `encrypted to the peer ${String(key).slice(0, 8)}…, sent in UDP to ${want}`
      : problems.join("; "),
    lease: leaseText,
  }, ok ? null : await doctorText(n.ctx, peer && hs?.severity === "critical" ? "wg-handshake" : "wg-peers"));
  return ok ? to.ip : null;
}

/**
 * The remote node decrypts: its flannel-wg. `underlayDst`: the address the packet was sent to. Returns the
 * interface the packet enters the kernel on, or null.
 */
export async function wgIngress(
  peer: TraceNode,
  lease: Lease,
  p: Path,
  family: 4 | 6 = 4,
  underlayDst?: string,
): Promise<string | null> {
  const pub = underlayDst ?? (family === 6 ? lease.attrs.PublicIPv6 : lease.attrs.PublicIP) ?? "";
  p.dev(peer.netns, deviceOf(peer, pub), "rx");
  if (!await wgDeviceHop(peer, "remote-wg-device", null, p, family)) return null;
  const dev = wgDevOf(peer.ctx, family);
  p.dev(peer.netns, dev, "rx");
  return dev;
}
