/**
 * The UDP backend's hops of the IPv4 walk: flannel0 on the source and on the remote node (the doctor's
 * udp-device finding, plus the pod MTU fitting it), the daemon's peer table (the userspace data path
 * sends the packet to the lease's PublicIP on the configured port), and the remote INPUT chain letting
 * the overlay datagrams reach the data path.
 * @module
 */
import type { Lease } from "../store/types.ts";
import { deviceOf } from "./hops.ts";
import type { Path } from "./path.ts";
import type { TraceNode } from "./types.ts";
import { overlayDeviceHop } from "./device_hop.ts";
import { udpPort } from "../observe/probes.ts";
import { UDP_DEVICE } from "../backend/config.ts";
import { udpDevice, udpPortCheck } from "../doctor/mod.ts";

/**
 * flannel0 on `n`: the doctor's udp-device finding (TUN, up, /32 address, MTU = underlay − 28, held open
 * by a live daemon), plus the pod MTU fitting it. Returns whether the hop is ok.
 */
export async function udpDeviceHop(
  n: TraceNode,
  step: string,
  podMtu: number | null,
  p: Path,
): Promise<boolean> {
  const f = (await udpDevice.run(n.ctx))[0];
  return await overlayDeviceHop(n, step, podMtu, p, UDP_DEVICE, "udp-device", f);
}

/**
 * The source node's udp overlay: flannel0 (the doctor's udp-device check), then the daemon's peer
 * table. Returns whether the packet is sent on to the lease's PublicIP.
 */
export async function udpOverlay(
  n: TraceNode,
  lease: Lease,
  leaseText: string,
  podMtu: number | null,
  p: Path,
): Promise<boolean> {
  if (!await udpDeviceHop(n, "udp-device", podMtu, p)) return false;
  p.dev(n.netns, UDP_DEVICE, "tx");
  const port = udpPort(n.ctx);
  const bt = lease.attrs.BackendType;
  const peerOk = bt === "udp" || bt === "";
  p.add({
    node: n.name,
    step: "udp-peer",
    ok: peerOk,
    entry: `${lease.subnet} → ${lease.attrs.PublicIP}:${port} (BackendType ${bt || '""'})`,
    detail: peerOk
      ? `the data path wraps the packet in UDP to ${lease.attrs.PublicIP}:${port}`
      : `the peer's lease has BackendType ${bt}: the udp data path does not send to it`,
    lease: leaseText,
  }, {
    why: "every node of a udp network must run the udp backend; the data path only keeps udp peers",
    fix: ["run every node with the same Backend.Type (the network config's)"],
  });
  return peerOk;
}

/**
 * The remote node receives the overlay datagram: INPUT lets the backend's port through (the doctor's
 * udp-port check), and its flannel0 hands the packet to the kernel. Returns the interface the packet
 * enters the kernel on (flannel0), or null when a hop is broken.
 */
export async function udpIngress(
  peer: TraceNode,
  lease: Lease,
  src: string | null,
  leaseText: string,
  p: Path,
): Promise<string | null> {
  const pc = peer.ctx;
  const f = (await udpPortCheck.run(pc))[0];
  const portOk = !f || f.severity !== "critical";
  p.add({
    node: peer.name,
    step: "remote-udp-port",
    ok: portOk,
    entry: f?.detail ?? "udp-port not checked",
    detail: portOk
      ? `INPUT lets UDP ${udpPort(pc)} from ${src ?? "the peer"} reach the data path`
      : "INPUT drops the overlay datagrams before the daemon reads them",
    lease: leaseText,
  }, portOk ? null : { why: f.why ?? f.detail, fix: f.fix ?? [], check: "udp-port" });
  if (!portOk) return null;
  p.dev(peer.netns, deviceOf(peer, lease.attrs.PublicIP), "rx");
  if (!await udpDeviceHop(peer, "remote-udp-device", null, p)) return null;
  p.dev(peer.netns, UDP_DEVICE, "rx");
  return UDP_DEVICE;
}
