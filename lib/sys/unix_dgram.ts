/**
 * One datagram to a unix socket named by a path or an abstract name ("@name"), from a socket of its own
 * (libc socket/sendto/close): sd_notify's transport. Deno has no stable unix *datagram* client:
 * `Deno.connectDatagram` does not exist and `Deno.listenDatagram({transport: "unixpacket"})` needs
 * `--unstable-net`, must bind a path of its own and cannot address abstract sockets, which systemd uses.
 * Callers pass and get bytes and numbers: no pointer leaves lib/sys.
 * @module
 */
import { errno, libc } from "./ffi.ts";
import { syscallError } from "./errors.ts";
import { AF_UNIX, EINVAL, MSG_NOSIGNAL, SOCK_CLOEXEC, SOCK_DGRAM } from "./consts.ts";

const SUN_PATH_MAX = 108;

function fail(op: string, e: number, message?: string): never {
  throw syscallError(op, e, message);
}

/**
 * Builds a `struct sockaddr_un` for `path` ("@name" = abstract). Returns the buffer and its length.
 * Throws NetlinkError (errno EINVAL) for an empty name or one longer than sun_path.
 */
export function sockaddrUn(path: string): { buf: Uint8Array<ArrayBuffer>; len: number } {
  const p = new TextEncoder().encode(path);
  if (p.length === 0 || p.length >= SUN_PATH_MAX) {
    fail(`sockaddr_un '${path}'`, EINVAL, `a unix socket name has 1 to ${SUN_PATH_MAX - 1} bytes`);
  }
  const buf = new Uint8Array(2 + SUN_PATH_MAX);
  new DataView(buf.buffer).setUint16(0, AF_UNIX, true);
  buf.set(p, 2);
  const abstract = path.startsWith("@");
  if (abstract) buf[2] = 0;
  // Abstract addresses are exactly as long as the name; paths include the terminating NUL.
  return { buf, len: 2 + p.length + (abstract ? 0 : 1) };
}

/**
 * Sends `data` as one datagram to the unix socket `path` ("@name" = abstract). Throws NetlinkError with
 * the errno when the socket cannot be made or the datagram is not sent whole (ENOENT, ECONNREFUSED, …).
 */
export function sendUnixDatagram(path: string, data: Uint8Array<ArrayBuffer>): void {
  const op = `sendto unix ${path}`;
  const { buf, len } = sockaddrUn(path);
  const fd = libc().socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket(AF_UNIX, SOCK_DGRAM)", errno());
  try {
    const n = libc().sendto(fd, data, data.length, MSG_NOSIGNAL, buf, len);
    if (n < 0) fail(op, errno());
    if (n !== data.length) fail(op, EINVAL, `sent ${n} of ${data.length} bytes`);
  } finally {
    libc().close(fd);
  }
}
