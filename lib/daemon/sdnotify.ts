/**
 * systemd readiness notification (`sd_notify`): a datagram such as "READY=1" sent to the unix socket named
 * by `NOTIFY_SOCKET`. Deno has no stable unix *datagram* client: `Deno.connectDatagram` does not exist
 * and `Deno.listenDatagram({transport: "unixpacket"})` needs `--unstable-net`, must bind a path of its own
 * and cannot address abstract sockets ("@..."), which systemd uses. So this calls libc's
 * socket/sendto/close through FFI (three calls; the daemon already needs --allow-ffi for libnl).
 * `systemd-notify` is no alternative: it sends from its own PID, which systemd ignores under the default
 * NotifyAccess=main.
 * @module
 */

const AF_UNIX = 1;
const SOCK_DGRAM = 2;
const SOCK_CLOEXEC = 0o2000000;
const MSG_NOSIGNAL = 0x4000;
const SUN_PATH_MAX = 108;

const SYMBOLS = {
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  sendto: { parameters: ["i32", "buffer", "usize", "i32", "buffer", "u32"], result: "isize" },
  close: { parameters: ["i32"], result: "i32" },
} as const;

let libc: Deno.DynamicLibrary<typeof SYMBOLS> | null = null;
function openLibc(): Deno.DynamicLibrary<typeof SYMBOLS> {
  libc ??= Deno.dlopen("libc.so.6", SYMBOLS);
  return libc;
}

/** Builds a `struct sockaddr_un` for `path` ("@name" = abstract). Returns the buffer and its length. */
export function sockaddrUn(path: string): { buf: Uint8Array<ArrayBuffer>; len: number } {
  const p = new TextEncoder().encode(path);
  if (p.length === 0 || p.length >= SUN_PATH_MAX) throw new Error(`NOTIFY_SOCKET '${path}' has a bad length`);
  const buf = new Uint8Array(2 + SUN_PATH_MAX);
  new DataView(buf.buffer).setUint16(0, AF_UNIX, true);
  buf.set(p, 2);
  const abstract = path.startsWith("@");
  if (abstract) buf[2] = 0;
  // Abstract addresses are exactly as long as the name; paths include the terminating NUL.
  return { buf, len: 2 + p.length + (abstract ? 0 : 1) };
}

/**
 * Sends `state` (e.g. "READY=1", "STOPPING=1", "STATUS=...") to systemd when NOTIFY_SOCKET is set.
 * Returns false when not running under systemd; throws when the socket exists but sending fails.
 */
export function sdNotify(
  state: string,
  socketPath: string | undefined = Deno.env.get("NOTIFY_SOCKET"),
): boolean {
  if (!socketPath) return false;
  const c = openLibc().symbols;
  const fd = c.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw new Error("sd_notify: socket(AF_UNIX, SOCK_DGRAM) failed");
  try {
    const { buf, len } = sockaddrUn(socketPath);
    const msg = new TextEncoder().encode(state);
    const n = c.sendto(fd, msg, BigInt(msg.length), MSG_NOSIGNAL, buf, len);
    if (Number(n) !== msg.length) throw new Error(`sd_notify: sendto ${socketPath} failed`);
    return true;
  } finally {
    c.close(fd);
  }
}
