/**
 * `flanctl inspect wireguard`: the WireGuard devices of the backend (flannel-wg, flannel-wg-v6) as they
 * report themselves, read the way each is driven (lib/backend/wireguard/read.ts: a `wireguard` link over
 * generic netlink in the inspected namespace, wireguard-go's TUN over its UAPI socket) — the device's
 * public key and port, and per peer its public key, endpoint, AllowedIPs, latest handshake, bytes and
 * keepalive, and whether a preshared key is set. No private or preshared key is ever read into a view (the
 * readers drop them as they parse).
 * @module
 */
import { type DeviceState, uapiSocket } from "../backend/wireguard/uapi.ts";
import { readDevice, wayOfKind } from "../backend/wireguard/read.ts";
import type { WgGenl } from "../backend/wireguard/kernel.ts";
import type { WgWayName } from "../backend/wireguard/driver.ts";
import { type NetnsRef, openNetlink } from "../netlink/mod.ts";
import { WG_DEVICE, WG_DEVICE_V6 } from "../backend/wireguard/options.ts";
import { errText } from "../base/errors.ts";
import { cell, renderTable } from "../base/ui/table.ts";

/** One peer as `inspect wireguard -o json` prints it. */
export interface WgPeerView {
  publicKey: string;
  endpoint: string | null;
  allowedIPs: string[];
  /** ISO time of the latest handshake, or null when there was none. */
  latestHandshake: string | null;
  txBytes: number;
  rxBytes: number;
  keepalive: number;
  presharedKey: boolean;
}

/** One device as `inspect wireguard -o json` prints it; `error` when it did not answer. */
export interface WgDeviceView {
  dev: string;
  /** How the device is driven: the kernel's `wireguard` link, or a userspace program's TUN. */
  way: WgWayName;
  /** userspace: its UAPI socket; kernel: null. */
  socket: string | null;
  publicKey: string | null;
  listenPort: number | null;
  peers: WgPeerView[];
  error: string | null;
}

/** The view of a device's state. */
export function wgDeviceView(
  dev: string,
  way: WgWayName,
  socket: string | null,
  st: DeviceState | string,
): WgDeviceView {
  if (typeof st === "string") {
    return { dev, way, socket, publicKey: null, listenPort: null, peers: [], error: st };
  }
  return {
    dev,
    way,
    socket,
    publicKey: st.publicKey,
    listenPort: st.listenPort,
    peers: st.peers.map((p) => ({
      publicKey: p.publicKey,
      endpoint: p.endpoint,
      allowedIPs: p.allowedIPs,
      latestHandshake: p.lastHandshake ? new Date(p.lastHandshake * 1000).toISOString() : null,
      txBytes: p.txBytes,
      rxBytes: p.rxBytes,
      keepalive: p.keepalive,
      presharedKey: p.presharedKey,
    })).sort((a, b) => (a.allowedIPs[0] ?? "").localeCompare(b.allowedIPs[0] ?? "")),
    error: null,
  };
}

/** Where and how `inspect wireguard` reads. */
export interface WgViewOptions {
  /** The namespace of the devices (`--netns`; default: the caller's). */
  ns?: NetnsRef | null;
  /** A device's link kind, or null when there is none (default: read over netlink in `ns`). */
  kindOf?: (dev: string) => string | null;
  /** The kernel's generic netlink calls (tests pass a fake). */
  genl?: WgGenl;
}

/** The link kinds of namespace `ns`, read once (none when the namespace cannot be read). */
function linkKinds(ns: NetnsRef | null): (dev: string) => string | null {
  let kinds: Map<string, string | null> | null = null;
  return (dev) => {
    if (!kinds) {
      kinds = new Map();
      try {
        const h = openNetlink(ns);
        try {
          for (const l of h.links()) kinds.set(l.name, l.kind);
        } finally {
          h.close();
        }
      } catch { /* unreadable: the sockets alone say which devices are userspace */ }
    }
    return kinds.get(dev) ?? null;
  };
}

/**
 * The backend's devices (or `dev` alone): a kernel `wireguard` link is read over generic netlink; else the
 * device is listed when its UAPI socket exists in `dir` (default /var/run/wireguard: the sockets are files,
 * so `--netns` does not change where they are).
 */
export async function wireguardViews(
  dev?: string,
  dir?: string,
  o: WgViewOptions = {},
): Promise<WgDeviceView[]> {
  const out: WgDeviceView[] = [];
  const kindOf = o.kindOf ?? linkKinds(o.ns ?? null);
  for (const d of dev ? [dev] : [WG_DEVICE, WG_DEVICE_V6]) {
    if (wayOfKind(kindOf(d)) === "kernel") {
      const st = await readDevice(d, "kernel", { ns: o.ns, genl: o.genl }).catch((e) => errText(e));
      out.push(wgDeviceView(d, "kernel", null, st));
      continue;
    }
    const socket = uapiSocket(d, dir);
    try {
      Deno.statSync(socket);
    } catch {
      if (dev) {
        out.push(
          wgDeviceView(d, "userspace", socket, "no UAPI socket and no kernel WireGuard device of that name"),
        );
      }
      continue;
    }
    out.push(
      wgDeviceView(
        d,
        "userspace",
        socket,
        await readDevice(d, "userspace", { socketDir: dir }).catch((e) => errText(e)),
      ),
    );
  }
  return out;
}

function ago(iso: string | null, now: number): string {
  if (!iso) return "never";
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  return `${s} s ago`;
}

/** The text of `inspect wireguard`: a line per device, then its peers' table. */
export function wireguardTable(views: WgDeviceView[], now = Date.now()): string {
  if (!views.length) {
    return "no WireGuard device of the backend (no kernel flannel-wg link, no socket in /var/run/wireguard)";
  }
  return views.map((v) => {
    if (v.error) return `${v.dev}: ${v.error}`;
    const head = `${v.dev} (${v.way}): public key ${
      v.publicKey ?? "(none)"
    }, port ${v.listenPort}, ${v.peers.length} peers`;
    const rows = v.peers.map((p) => [
      p.allowedIPs.join(","),
      cell(p.endpoint),
      p.publicKey,
      ago(p.latestHandshake, now),
      String(p.rxBytes),
      String(p.txBytes),
      p.keepalive ? `${p.keepalive} s` : "off",
      p.presharedKey ? "yes" : "no",
    ]);
    return head + "\n" +
      renderTable(
        ["ALLOWED IPS", "ENDPOINT", "PUBLIC KEY", "HANDSHAKE", "RX", "TX", "KEEPALIVE", "PSK"],
        rows,
      );
  }).join("\n\n");
}
