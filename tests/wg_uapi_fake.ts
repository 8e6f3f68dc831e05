/**
 * A fake WireGuard UAPI server on a unix socket for unit tests: it keeps a device's configuration as
 * wireguard-go does (set=1 / get=1, replace_peers, remove, replace_allowed_ips), records every request and
 * can be told to refuse a listen port with EADDRINUSE, as wireguard-go does when the port is taken.
 * @module
 */

interface FakePeer {
  psk: string;
  endpoint: string | null;
  keepalive: number;
  allowed: string[];
  lastHandshake: number;
}

/** The fake device. */
export class FakeUapi {
  readonly path: string;
  privateKey: string | null = null;
  listenPort = 0;
  readonly peers = new Map<string, FakePeer>();
  /** Every request's text, in order. */
  readonly requests: string[] = [];
  /** Listen ports refused with errno -98. */
  readonly portsInUse = new Set<number>();
  readonly #listener: Deno.Listener;
  readonly #served: Promise<void>;

  constructor(path: string) {
    this.path = path;
    this.#listener = Deno.listen({ transport: "unix", path });
    this.#served = this.#serve();
  }

  async #serve(): Promise<void> {
    for await (const c of this.#listener) void this.#conn(c).catch(() => {});
  }

  async #conn(c: Deno.Conn): Promise<void> {
    const buf = new Uint8Array(65536);
    let text = "";
    const dec = new TextDecoder();
    try {
      for (;;) {
        const end = text.indexOf("\n\n");
        if (end >= 0) {
          const req = text.slice(0, end + 2);
          text = text.slice(end + 2);
          this.requests.push(req);
          const reply = this.handle(req.split("\n").slice(0, -2));
          await c.write(new TextEncoder().encode(reply));
          continue;
        }
        const n = await c.read(buf);
        if (n === null) return;
        text += dec.decode(buf.subarray(0, n));
      }
    } finally {
      c.close();
    }
  }

  /** Handles one request's lines; returns the reply. */
  handle(lines: string[]): string {
    const op = lines.shift();
    if (op === "get=1") return this.#get();
    if (op !== "set=1") return "errno=-22\n\n";
    let peer: FakePeer | null = null;
    let key = "";
    for (const l of lines) {
      const [k, v] = [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)];
      if (k === "public_key") {
        key = v;
        peer = this.peers.get(v) ??
          { psk: "0".repeat(64), endpoint: null, keepalive: 0, allowed: [], lastHandshake: 0 };
        this.peers.set(v, peer);
      } else if (!peer) {
        if (k === "private_key") this.privateKey = v;
        else if (k === "listen_port") {
          if (this.portsInUse.has(Number(v))) return "errno=-98\n\n";
          this.listenPort = Number(v);
        } else if (k === "replace_peers") this.peers.clear();
        else return "errno=-22\n\n";
      } else if (k === "remove") this.peers.delete(key);
      else if (k === "preshared_key") peer.psk = v;
      else if (k === "endpoint") peer.endpoint = v;
      else if (k === "persistent_keepalive_interval") peer.keepalive = Number(v);
      else if (k === "replace_allowed_ips") peer.allowed = [];
      else if (k === "allowed_ip") peer.allowed.push(v);
      else return "errno=-22\n\n";
    }
    return "errno=0\n\n";
  }

  #get(): string {
    const out: string[] = [];
    if (this.privateKey) out.push(`private_key=${this.privateKey}`);
    if (this.listenPort) out.push(`listen_port=${this.listenPort}`);
    for (const [k, p] of this.peers) {
      out.push(`public_key=${k}`, `preshared_key=${p.psk}`, "protocol_version=1");
      if (p.endpoint) out.push(`endpoint=${p.endpoint}`);
      out.push(
        `last_handshake_time_sec=${p.lastHandshake}`,
        "last_handshake_time_nsec=0",
        "tx_bytes=0",
        "rx_bytes=0",
        `persistent_keepalive_interval=${p.keepalive}`,
      );
      for (const a of p.allowed) out.push(`allowed_ip=${a}`);
    }
    return out.map((l) => l + "\n").join("") + "errno=0\n\n";
  }

  async close(): Promise<void> {
    this.#listener.close();
    await this.#served.catch(() => {});
  }
}
