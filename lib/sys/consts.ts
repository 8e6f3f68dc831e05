/**
 * The OS numbers the FFI callers pass and compare (x86-64 and arm64 Linux share every one of them): address
 * families, socket types, flags and options, open(2) flags, interface name size, errno values. One place
 * for lib/sys, lib/netlink (codec/consts.ts re-exports the ones netlink requests use) and the udp backend;
 * netlink's own message numbers are in lib/netlink/codec/consts.ts.
 * @module
 */

/** Address families (linux/socket.h). */
export const AF_UNSPEC = 0,
  AF_UNIX = 1,
  AF_INET = 2,
  AF_BRIDGE = 7,
  AF_INET6 = 10,
  AF_NETLINK = 16,
  AF_LLC = 26;
/** socket(2) types and flags (linux/net.h, asm-generic/fcntl.h). */
export const SOCK_DGRAM = 2, SOCK_RAW = 3, SOCK_NONBLOCK = 0o4000, SOCK_CLOEXEC = 0o2000000;
/** Socket-level options (asm-generic/socket.h). */
export const SOL_SOCKET = 1, SO_SNDBUF = 7, SO_RCVBUF = 8, SO_SNDBUFFORCE = 32, SO_RCVBUFFORCE = 33;
/** UDP options: GSO and GRO (linux/udp.h). */
export const SOL_UDP = 17, UDP_SEGMENT = 103, UDP_GRO = 104;
/** send(2)/recv(2) flags (linux/socket.h). */
export const MSG_PEEK = 0x2, MSG_TRUNC = 0x20, MSG_NOSIGNAL = 0x4000;
/** open(2) flags (asm-generic/fcntl.h). */
export const O_RDONLY = 0, O_RDWR = 0o2, O_NONBLOCK = 0o4000, O_CLOEXEC = 0o2000000;
/** An interface name's buffer, NUL included (linux/if.h). */
export const IFNAMSIZ = 16;
/** errno values (asm-generic/errno-base.h, asm-generic/errno.h). */
export const ENOENT = 2,
  ESRCH = 3,
  EINTR = 4,
  EIO = 5,
  EAGAIN = 11,
  EBUSY = 16,
  EEXIST = 17,
  EXDEV = 18,
  ENODEV = 19,
  EINVAL = 22,
  EOPNOTSUPP = 95,
  EADDRINUSE = 98,
  ENETUNREACH = 101,
  EHOSTUNREACH = 113;
