/**
 * Errors of the kernel layer. A failed libnl call becomes a {@link NetlinkError} that names the
 * operation the way iproute2 would type it, and the kernel's answer the way iproute2 prints it
 * (`route replace 10.244.2.0/24 via 10.244.2.0 dev flannel.1: File exists`).
 * @module
 */
import { FlanctlError } from "../base/errors.ts";

/** libnl error codes (netlink/errno.h), positive; libnl returns them negated. */
export const NLE = {
  FAILURE: 1,
  INTR: 2,
  BAD_SOCK: 3,
  AGAIN: 4,
  NOMEM: 5,
  EXIST: 6,
  INVAL: 7,
  RANGE: 8,
  MSGSIZE: 9,
  OPNOTSUPP: 10,
  AF_NOSUPPORT: 11,
  OBJ_NOTFOUND: 12,
  NOATTR: 13,
  MISSING_ATTR: 14,
  AF_MISMATCH: 15,
  NOADDR: 19,
  BUSY: 25,
  PROTO_MISMATCH: 26,
  NOACCESS: 27,
  PERM: 28,
  NODEV: 31,
} as const;

// libnl folds the kernel's errno into NLE_* (nl_syserr2nlerr); these are the strerror() texts iproute2
// prints for the errno each NLE_* code comes from.
const ERRNO_TEXT: Record<number, string> = {
  [NLE.INTR]: "Interrupted system call",
  [NLE.BAD_SOCK]: "Bad file descriptor",
  [NLE.AGAIN]: "Resource temporarily unavailable",
  [NLE.NOMEM]: "Cannot allocate memory",
  [NLE.EXIST]: "File exists",
  [NLE.INVAL]: "Invalid argument",
  [NLE.RANGE]: "Numerical result out of range",
  [NLE.OPNOTSUPP]: "Operation not supported",
  [NLE.AF_NOSUPPORT]: "Address family not supported by protocol",
  [NLE.OBJ_NOTFOUND]: "No such file or directory",
  [NLE.NOADDR]: "Cannot assign requested address",
  [NLE.BUSY]: "Device or resource busy",
  [NLE.PROTO_MISMATCH]: "Protocol not supported",
  [NLE.NOACCESS]: "Permission denied",
  [NLE.PERM]: "Operation not permitted",
  [NLE.NODEV]: "No such device",
};

// errno values (asm-generic/errno*.h) the kernel answers rtnetlink requests with, their strerror() text and
// the NLE_* code libnl's nl_syserr2nlerr() folds them into.
const ERRNO: Record<number, [string, number]> = {
  1: ["Operation not permitted", NLE.PERM],
  2: ["No such file or directory", NLE.OBJ_NOTFOUND],
  3: ["No such process", NLE.OBJ_NOTFOUND],
  4: ["Interrupted system call", NLE.INTR],
  9: ["Bad file descriptor", NLE.BAD_SOCK],
  11: ["Resource temporarily unavailable", NLE.AGAIN],
  12: ["Cannot allocate memory", NLE.NOMEM],
  13: ["Permission denied", NLE.NOACCESS],
  14: ["Bad address", NLE.INVAL],
  16: ["Device or resource busy", NLE.BUSY],
  17: ["File exists", NLE.EXIST],
  19: ["No such device", NLE.NODEV],
  22: ["Invalid argument", NLE.INVAL],
  28: ["No space left on device", NLE.FAILURE],
  34: ["Numerical result out of range", NLE.RANGE],
  36: ["File name too long", NLE.FAILURE],
  61: ["No data available", NLE.FAILURE],
  88: ["Socket operation on non-socket", NLE.BAD_SOCK],
  92: ["Protocol not available", NLE.INVAL],
  93: ["Protocol not supported", NLE.PROTO_MISMATCH],
  95: ["Operation not supported", NLE.OPNOTSUPP],
  97: ["Address family not supported by protocol", NLE.AF_NOSUPPORT],
  98: ["Address already in use", NLE.EXIST],
  99: ["Cannot assign requested address", NLE.NOADDR],
  100: ["Network is down", NLE.FAILURE],
  101: ["Network is unreachable", NLE.FAILURE],
  105: ["No buffer space available", NLE.NOMEM],
  113: ["No route to host", NLE.FAILURE],
};

/** strerror() text of a kernel errno (positive or negative). */
export function errnoText(errno: number): string {
  return ERRNO[Math.abs(errno)]?.[0] ?? `errno ${Math.abs(errno)}`;
}

/** The NLE_* code (negative) libnl would report for a kernel errno, as nl_syserr2nlerr() maps it. */
export function errnoToNle(errno: number): number {
  return -(ERRNO[Math.abs(errno)]?.[1] ?? NLE.FAILURE);
}

/**
 * The error of a failed libc call outside libnl (a socket, an ioctl, execve): errno `e` as NetlinkError's
 * `errno`, libnl's code for it as nl_syserr2nlerr() maps it, and `message` (default: strerror's text).
 */
export function syscallError(op: string, e: number, message?: string): NetlinkError {
  return new NetlinkError(op, errnoToNle(e), errnoText(e), message ?? errnoText(e), { errno: e });
}

/** The errno-like text iproute2 would print for libnl code `code` (negative or positive). */
export function nleText(code: number, libnlMessage: string): string {
  return ERRNO_TEXT[Math.abs(code)] ?? libnlMessage;
}

/** A libnl/kernel call that failed. */
export class NetlinkError extends FlanctlError {
  /** libnl error code, negative (`-NLE_EXIST` = -6). */
  readonly code: number;
  /** libnl's own text, or how to get it: computed on first read (see the constructor). */
  #libnl: string | (() => string);
  /** The operation, iproute2-style: `route replace 10.244.2.0/24 via 10.244.2.0 dev flannel.1`. */
  readonly op: string;
  /** The kernel's errno when the kernel refused the request (positive), else null. */
  readonly errno: number | null;
  /** The kernel's extended-ack message (what iproute2 prints as "Error: ..."), if it sent one. */
  readonly kernelMessage: string | null;
  /**
   * `libnlMessage` may be a function returning it: called only when the text is needed (no `text`
   * given, or {@link libnlMessage} read), so an expected error (a lookup's "no such device") does not
   * bind `nl_geterror` (a cost on a CNI call's first use).
   */
  constructor(
    op: string,
    code: number,
    libnlMessage: string | (() => string),
    text?: string,
    kernel: { errno?: number; message?: string | null } = {},
  ) {
    if (text === undefined && typeof libnlMessage === "function") libnlMessage = libnlMessage();
    super(
      `${op}: ${text ?? nleText(code, libnlMessage as string)}${
        kernel.message ? ` (${kernel.message})` : ""
      }`,
    );
    this.#libnl = libnlMessage;
    this.code = -Math.abs(code);
    this.op = op;
    this.errno = kernel.errno ?? null;
    this.kernelMessage = kernel.message ?? null;
  }
  /** libnl's own text for the code (`nl_geterror`). */
  get libnlMessage(): string {
    if (typeof this.#libnl === "function") this.#libnl = this.#libnl();
    return this.#libnl;
  }
  /** True for "already exists" (NLE_EXIST). */
  get exists(): boolean {
    return this.code === -NLE.EXIST;
  }
  /** True for "not found" answers (NLE_OBJ_NOTFOUND, NLE_NODEV). */
  get notFound(): boolean {
    return this.code === -NLE.OBJ_NOTFOUND || this.code === -NLE.NODEV;
  }
}
