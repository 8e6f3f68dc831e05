/**
 * The socket context the per-object modules of the libnl handle work on ({@link Conn}), libnl error
 * texts and nl_addr helpers.
 * @module
 */
import { nl, type OutPtr, readCString } from "../sys/ffi.ts";
import { NetlinkError, NLE } from "../sys/errors.ts";
import { formatIP, formatMac, parseIPBytes } from "./codec/format.ts";
import { AF_INET, AF_INET6 } from "./codec/consts.ts";
import type { LinkRef } from "./types.ts";

/** A native pointer (libnl object, message or socket). */
export type Ptr = Deno.PointerValue;

/**
 * What the per-object modules (link, addr, route, neigh, nsid) need from a {@link NetlinkHandle}'s
 * socket: the socket itself, error checks, the name → ifindex cache and reusable scratch buffers.
 * Internal to lib/netlink (pointers never leave it); made by the handle, one per socket.
 */
export interface Conn {
  /**
   * libnl's nl_sock over the handle's socket (made on first use), without the closed check (callers
   * already passed {@link Conn.live}).
   */
  sock(): Ptr;
  /** libnl's nl_sock over the handle's socket (made on first use); throws when the handle was closed. */
  live(): Ptr;
  /**
   * The socket's file descriptor, for requests sent and answers read through libc (batch.ts), which need
   * no nl_sock and none of libnl's symbols; throws when the handle was closed.
   */
  fd(): number;
  /** Throws a NetlinkError for a negative libnl code; `op` names the operation (iproute2 style). */
  check(err: number, op: () => string): void;
  /** Runs `fn` once more with a fresh name cache when it failed with "No such device". */
  retry<T>(fn: () => T): T;
  /** ifindex of a link name or number (cached per handle). */
  index(ref: LinkRef, op: () => string): number;
  /** Clears the name → ifindex cache (after links moved or were deleted). */
  forget(): void;
  /** Out-pointer for libnl allocations (caches, objects, messages). */
  readonly out: OutPtr;
  /** Second out-pointer, for objects parsed while {@link Conn.out} holds a receive buffer. */
  readonly out2: OutPtr;
  readonly i32: Int32Array<ArrayBuffer>;
  readonly u32: Uint32Array<ArrayBuffer>;
  readonly b4: Uint8Array<ArrayBuffer>;
  readonly b16: Uint8Array<ArrayBuffer>;
  readonly b6: Uint8Array<ArrayBuffer>;
  /** JS copy of the last receive buffer of a compact scan (grown as needed, reused). */
  rx: Uint8Array<ArrayBuffer>;
}

/** Text of a libnl error code. */
export function geterror(code: number): string {
  return readCString(nl().nl_geterror(code)) ?? `libnl error ${code}`;
}

/** Reads an nl_addr as IP text (null for a NULL or empty address). */
export function readIp(c: Conn, a: Ptr): string | null {
  if (a === null) return null;
  const len = nl().nl_addr_get_len(a);
  if (len !== 4 && len !== 16) return null;
  const buf = len === 4 ? c.b4 : c.b16;
  Deno.UnsafePointerView.copyInto(nl().nl_addr_get_binary_addr(a)!, buf);
  return formatIP(buf);
}

/** Reads an nl_addr holding a 6-byte (or other non-IP) link-layer address. */
export function readMac(c: Conn, a: Ptr): string | null {
  if (a === null) return null;
  const len = nl().nl_addr_get_len(a);
  if (len === 0 || len === 4 || len === 16) return null;
  const buf = len === 6 ? c.b6 : new Uint8Array(len);
  Deno.UnsafePointerView.copyInto(nl().nl_addr_get_binary_addr(a)!, buf);
  return formatMac(buf);
}

/** Builds a new nl_addr (caller puts it). */
export function buildAddr(family: number, bytes: Uint8Array<ArrayBuffer>, prefix?: number): NonNullable<Ptr> {
  const a = nl().nl_addr_build(family, bytes, BigInt(bytes.length));
  if (a === null) throw new NetlinkError("address alloc", -NLE.NOMEM, geterror(-NLE.NOMEM));
  if (prefix !== undefined) nl().nl_addr_set_prefixlen(a, prefix);
  return a;
}

/** Builds a new nl_addr from IP text (`field` names it in a ParseError); caller puts it. */
export function buildIpAddr(s: string, field: string): NonNullable<Ptr> {
  const b = parseIPBytes(s, field);
  return buildAddr(b.length === 4 ? AF_INET : AF_INET6, b);
}

/** IP text of a 4- or 16-byte address at `b[off]` (a netlink attribute value), null for another length. */
export function ip4or6(b: Uint8Array, off: number, len: number): string | null {
  if (len === 4) return `${b[off]}.${b[off + 1]}.${b[off + 2]}.${b[off + 3]}`;
  if (len === 16) return formatIP(b.subarray(off, off + 16));
  return null;
}
