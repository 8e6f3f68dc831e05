/**
 * systemd readiness notification (`sd_notify`): a datagram such as "READY=1" sent to the unix socket named
 * by `NOTIFY_SOCKET`. The datagram goes out through the kernel layer's libc binding
 * ({@link sendUnixDatagram}: Deno has no stable unix datagram client and cannot address the abstract
 * sockets systemd uses). `systemd-notify` is no alternative: it sends from its own PID, which systemd
 * ignores under the default NotifyAccess=main.
 * @module
 */
import { sendUnixDatagram } from "../os/mod.ts";

/**
 * Sends `state` (e.g. "READY=1", "STOPPING=1", "STATUS=...") to systemd when NOTIFY_SOCKET is set.
 * Returns false when not running under systemd; throws (NetlinkError with the errno) when the socket is
 * named but sending fails.
 */
export function sdNotify(
  state: string,
  socketPath: string | undefined = Deno.env.get("NOTIFY_SOCKET"),
): boolean {
  if (!socketPath) return false;
  sendUnixDatagram(socketPath, new TextEncoder().encode(state));
  return true;
}
