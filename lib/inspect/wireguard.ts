/**
 * `flanctl inspect wireguard`: the WireGuard devices of the backend (flannel-wg, flannel-wg-v6) as their
 * UAPI sockets report them — the device's public key and port, and per peer its public key, endpoint,
 * AllowedIPs, latest handshake, bytes and keepalive, and whether a preshared key is set. No private or
 * preshared key is ever read into a view (lib/backend/wireguard/uapi.ts drops them as it parses).
 * @module
 */
import { type DeviceState, uapiGet, uapiSocket } from "../backend/wireguard/uapi.ts";
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

/** One device as `inspect wireguard -o json` prints it; `error` when its socket did not answer. */
export interface WgDeviceView {
  dev: string;
  socket: string;
  publicKey: string | null;
  listenPort: number | null;
  peers: WgPeerView[];
  error: string | null;
}

/** The view of a device's state. */
export function wgDeviceView(dev: string, socket: string, st: DeviceState | string): WgDeviceView {
  if (typeof st === "string") return { dev, socket, publicKey: null, listenPort: null, peers: [], error: st };
  return {
    dev,
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

/**
 * The backend's devices whose UAPI socket exists (or `dev` alone), read in `dir` (default
 * /var/run/wireguard: the sockets are files, so `--netns` does not change where they are).
 */
export async function wireguardViews(dev?: string, dir?: string): Promise<WgDeviceView[]> {
  const out: WgDeviceView[] = [];
  for (const d of dev ? [dev] : [WG_DEVICE, WG_DEVICE_V6]) {
    const socket = uapiSocket(d, dir);
    try {
      Deno.statSync(socket);
    } catch {
      if (dev) {
        out.push(wgDeviceView(d, socket, "no UAPI socket (no userspace WireGuard device of that name)"));
      }
      continue;
    }
    out.push(wgDeviceView(d, socket, await uapiGet(socket, 3000).catch((e) => errText(e))));
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
  if (!views.length) return "no WireGuard device of the backend (no socket in /var/run/wireguard)";
  return views.map((v) => {
    if (v.error) return `${v.dev}: ${v.error}`;
    const head = `${v.dev}: public key ${
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
