/**
 * A client of the WireGuard cross-platform configuration protocol (the "UAPI", wireguard.com/xplatform),
 * which wireguard-go and boringtun serve on a unix socket, `/var/run/wireguard/<device>.sock`:
 *
 * - `set=1\n`, then `key=value` lines (`private_key`, `listen_port`, `replace_peers`; per peer, starting
 *   with `public_key`: `remove`, `preshared_key`, `endpoint`, `persistent_keepalive_interval`,
 *   `replace_allowed_ips`, `allowed_ip`), then an empty line; the reply is `errno=N\n\n`.
 * - `get=1\n\n`; the reply is the device's `key=value` lines (keys in lower-case hex), then `errno=N\n\n`.
 *
 * The reply is bounded (size, lines, values checked); what the device says is data, never trusted as text.
 * The private key a `get` returns is turned into its public key at once and dropped; a preshared key into
 * "set or not".
 * @module
 */
import { FlanctlError } from "../../base/errors.ts";
import { keyBase64, keyFromHex, parseKey, publicKeyOf } from "./keys.ts";

/** The directory wireguard-go serves its UAPI sockets in (fixed in its source: ipc/uapi_unix.go). */
export const UAPI_SOCKET_DIR = "/var/run/wireguard";

/** The UAPI socket of device `dev`. */
export function uapiSocket(dev: string, dir = UAPI_SOCKET_DIR): string {
  return `${dir}/${dev}.sock`;
}

/** Largest reply read (5,000 peers take about 2 MB). */
export const UAPI_MAX_REPLY = 8 * 1024 * 1024;
/** Default time for one request. */
export const UAPI_TIMEOUT_MS = 5_000;

/** The device refused a request (errno ≠ 0), did not answer, or answered what is not the protocol. */
export class UapiError extends FlanctlError {
  /** The reply's errno (negative, as wireguard-go sends it), or null when there was no valid reply. */
  readonly errno: number | null;
  constructor(message: string, errno: number | null = null) {
    super(message, 1);
    this.errno = errno;
  }
}

/** One peer of a `set` request. Keys: `publicKey` base64, `presharedKeyHex` hex. */
export interface PeerSet {
  publicKey: string;
  /** Removes the peer (nothing else is sent for it). */
  remove?: boolean;
  /** Hex of the preshared key; "" clears it; undefined leaves it as it is. */
  presharedKeyHex?: string;
  /** `IP:port` or `[IPv6]:port`. */
  endpoint?: string;
  /** Seconds; 0 turns keepalives off. */
  keepalive?: number;
  /** When given, replaces the peer's allowed IPs with these CIDRs. */
  allowedIPs?: string[];
}

/** A `set` request. */
export interface DeviceSet {
  privateKeyHex?: string;
  listenPort?: number;
  replacePeers?: boolean;
  peers?: PeerSet[];
}

const CIDR_RE = /^[0-9a-fA-F:.]+\/\d{1,3}$/;
const ENDPOINT_RE = /^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]):\d{1,5}$/;

function hexOf(base64: string): string {
  const k = parseKey(base64);
  if (!k) throw new UapiError("a peer's public key is not base64 of 32 bytes");
  return Array.from(k, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The text of a `set` request (every value checked: nothing of a lease reaches the socket unchecked). */
export function encodeSet(s: DeviceSet): string {
  const out = ["set=1"];
  if (s.privateKeyHex !== undefined) {
    if (!/^[0-9a-f]{64}$/.test(s.privateKeyHex)) throw new UapiError("private key: not 32 bytes of hex");
    out.push(`private_key=${s.privateKeyHex}`);
  }
  if (s.listenPort !== undefined) {
    if (!Number.isInteger(s.listenPort) || s.listenPort < 0 || s.listenPort > 65535) {
      throw new UapiError(`listen port ${s.listenPort}: not 0–65535`);
    }
    out.push(`listen_port=${s.listenPort}`);
  }
  if (s.replacePeers) out.push("replace_peers=true");
  for (const p of s.peers ?? []) {
    out.push(`public_key=${hexOf(p.publicKey)}`);
    if (p.remove) {
      out.push("remove=true");
      continue;
    }
    if (p.presharedKeyHex !== undefined) {
      if (p.presharedKeyHex !== "" && !/^[0-9a-f]{64}$/.test(p.presharedKeyHex)) {
        throw new UapiError("preshared key: not 32 bytes of hex");
      }
      out.push(`preshared_key=${p.presharedKeyHex || "0".repeat(64)}`);
    }
    if (p.endpoint !== undefined) {
      if (!ENDPOINT_RE.test(p.endpoint)) {
        throw new UapiError(`endpoint ${JSON.stringify(p.endpoint)}: not IP:port`);
      }
      out.push(`endpoint=${p.endpoint}`);
    }
    if (p.keepalive !== undefined) {
      if (!Number.isInteger(p.keepalive) || p.keepalive < 0 || p.keepalive > 65535) {
        throw new UapiError(`keepalive ${p.keepalive}: not 0–65535 seconds`);
      }
      out.push(`persistent_keepalive_interval=${p.keepalive}`);
    }
    if (p.allowedIPs) {
      out.push("replace_allowed_ips=true");
      for (const c of p.allowedIPs) {
        if (!CIDR_RE.test(c)) throw new UapiError(`allowed IP ${JSON.stringify(c)}: not a CIDR`);
        out.push(`allowed_ip=${c}`);
      }
    }
  }
  return out.join("\n") + "\n\n";
}

/** A peer as a `get` shows it (no key material but the public key). */
export interface PeerState {
  /** base64, as the lease carries it. */
  publicKey: string;
  /** A non-zero preshared key is set. */
  presharedKey: boolean;
  endpoint: string | null;
  /** Seconds since the epoch of the last handshake; 0 = none yet. */
  lastHandshake: number;
  txBytes: number;
  rxBytes: number;
  keepalive: number;
  allowedIPs: string[];
}

/** A device as a `get` shows it: its public key (from its private key), port, peers. */
export interface DeviceState {
  /** The public key of the device's private key (base64), or null when none is set. */
  publicKey: string | null;
  listenPort: number;
  fwmark: number;
  peers: PeerState[];
}

function num(key: string, v: string): number {
  if (!/^\d{1,20}$/.test(v)) throw new UapiError(`get: ${key} is not a number`);
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new UapiError(`get: ${key} is out of range`);
  return n;
}

/** Parses the lines of a `get` reply (without the `errno` line). Unknown keys are skipped. */
export function parseGet(lines: readonly string[]): DeviceState {
  const dev: DeviceState = { publicKey: null, listenPort: 0, fwmark: 0, peers: [] };
  let peer: PeerState | null = null;
  for (const line of lines) {
    const eq = line.indexOf("=");
    if (eq <= 0) throw new UapiError("get: a line is not key=value");
    const k = line.slice(0, eq), v = line.slice(eq + 1);
    if (k === "public_key") {
      const key = keyFromHex(v);
      if (!key) throw new UapiError("get: a public_key is not 32 bytes of hex");
      peer = {
        publicKey: keyBase64(key),
        presharedKey: false,
        endpoint: null,
        lastHandshake: 0,
        txBytes: 0,
        rxBytes: 0,
        keepalive: 0,
        allowedIPs: [],
      };
      dev.peers.push(peer);
      continue;
    }
    if (!peer) {
      if (k === "private_key") {
        const key = keyFromHex(v);
        if (!key) throw new UapiError("get: private_key is not 32 bytes of hex");
        dev.publicKey = keyBase64(publicKeyOf(key));
        key.fill(0);
      } else if (k === "listen_port") dev.listenPort = num(k, v);
      else if (k === "fwmark") dev.fwmark = num(k, v);
      continue;
    }
    switch (k) {
      case "preshared_key":
        peer.presharedKey = /^[0-9a-f]{64}$/.test(v) && /[^0]/.test(v);
        break;
      case "endpoint":
        if (!ENDPOINT_RE.test(v)) throw new UapiError("get: an endpoint is not IP:port");
        peer.endpoint = v;
        break;
      case "last_handshake_time_sec":
        peer.lastHandshake = num(k, v);
        break;
      case "tx_bytes":
        peer.txBytes = num(k, v);
        break;
      case "rx_bytes":
        peer.rxBytes = num(k, v);
        break;
      case "persistent_keepalive_interval":
        peer.keepalive = num(k, v);
        break;
      case "allowed_ip":
        if (!CIDR_RE.test(v)) throw new UapiError("get: an allowed_ip is not a CIDR");
        peer.allowedIPs.push(v);
        break;
    }
  }
  return dev;
}

/** Splits a reply into its lines and errno; null while it is not complete (no `errno=` line + blank yet). */
export function splitReply(text: string): { lines: string[]; errno: number } | null {
  const end = text.indexOf("\n\n");
  if (end < 0) return null;
  const lines = text.slice(0, end).split("\n");
  const last = lines.pop() ?? "";
  const m = /^errno=(-?\d{1,6})$/.exec(last);
  if (!m) throw new UapiError("the reply does not end in errno=N");
  return { lines, errno: Number(m[1]) };
}

/** errno values wireguard-go replies with, named. */
const ERRNOS: Record<number, string> = {
  [-5]: "EIO",
  [-71]: "EPROTO",
  [-22]: "EINVAL (a value the device refused)",
  [-98]: "EADDRINUSE (the listen port is taken)",
  [-55]: "ENOANO",
};

/** Sends one request to the socket at `path` and returns the reply's lines (errno 0), else throws. */
export async function request(path: string, text: string, timeoutMs = UAPI_TIMEOUT_MS): Promise<string[]> {
  let conn: Deno.UnixConn;
  try {
    conn = await Deno.connect({ transport: "unix", path });
  } catch (e) {
    throw new UapiError(`UAPI socket ${path}: ${(e as Error).message}`);
  }
  const timer = setTimeout(() => conn.close(), timeoutMs);
  try {
    await writeAll(conn, new TextEncoder().encode(text));
    const dec = new TextDecoder();
    const buf = new Uint8Array(64 * 1024);
    let got = "";
    let size = 0;
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) throw new UapiError(`UAPI socket ${path}: closed before the reply ended`);
      size += n;
      if (size > UAPI_MAX_REPLY) {
        throw new UapiError(`UAPI socket ${path}: reply over ${UAPI_MAX_REPLY} bytes`);
      }
      got += dec.decode(buf.subarray(0, n), { stream: true });
      const r = splitReply(got);
      if (!r) continue;
      if (r.errno !== 0) {
        throw new UapiError(
          `UAPI socket ${path}: the device refused the request: errno ${ERRNOS[r.errno] ?? r.errno}`,
          r.errno,
        );
      }
      return r.lines;
    }
  } catch (e) {
    if (e instanceof UapiError) throw e;
    throw new UapiError(`UAPI socket ${path}: ${(e as Error).message} (no reply in ${timeoutMs} ms?)`);
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* closed by the timer */ }
  }
}

async function writeAll(conn: Deno.UnixConn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

/** The device's state (`get=1`). */
export async function uapiGet(path: string, timeoutMs?: number): Promise<DeviceState> {
  return parseGet(await request(path, "get=1\n\n", timeoutMs));
}

/** Applies a `set=1` request. */
export async function uapiSet(path: string, s: DeviceSet, timeoutMs?: number): Promise<void> {
  await request(path, encodeSet(s), timeoutMs);
}
