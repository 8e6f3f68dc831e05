/**
 * The libnl implementation of {@link NetlinkHandle}: one NETLINK_ROUTE socket, created inside the target
 * network namespace, read through libnl caches and written through libnl objects (raw messages where libnl
 * has no setter). Every libnl object allocated or referenced here is released before the method returns.
 * @module
 */
import { FlanctlError, ParseError } from "../errors.ts";
import { cstr, libc, nl, OutPtr, readCString, rt } from "./ffi.ts";
import { errnoText, errnoToNle, NetlinkError, NLE } from "./errors.ts";
import {
  addrScopeName,
  formatIP,
  formatMac,
  linkFlagNames,
  maskBytes,
  nexthopFlagNames,
  ntfNames,
  nudNames,
  operstateName,
  parseIPBytes,
  parseMac,
  parsePrefix,
  protocolName,
  protocolValue,
  routeScopeName,
  routeTypeName,
  scopeValue,
} from "./format.ts";
import { closeFd, inNetns, netnsLabel, openNetnsFd } from "./netns.ts";
import { getTxChecksum, setTxChecksum } from "./ethtool.ts";
import type {
  AddrInfo,
  FdbInfo,
  FdbScanEntry,
  LinkInfo,
  LinkRef,
  NeighInfo,
  NeighScanEntry,
  NetlinkHandle,
  NetnsRef,
  RouteInfo,
  RouteScanEntry,
  RouteSpec,
  VxlanInfo,
} from "./types.ts";

type Ptr = Deno.PointerValue;

const AF_UNSPEC = 0, AF_INET = 2, AF_BRIDGE = 7, AF_INET6 = 10, AF_LLC = 26;
const NETLINK_ROUTE = 0;
const NLM_F_REQUEST = 0x1,
  NLM_F_DUMP = 0x300,
  NLM_F_REPLACE = 0x100,
  NLM_F_EXCL = 0x200,
  NLM_F_CREATE = 0x400;
const NLMSG_ERROR = 2, NLMSG_DONE = 3, NLMSG_ALIGNTO = 4, NLM_F_CAPPED = 0x100, NLM_F_ACK_TLVS = 0x200;
const SOL_NETLINK = 270, NETLINK_CAP_ACK = 10, NETLINK_EXT_ACK = 11, NLMSGERR_ATTR_MSG = 1;
const NETLINK_GET_STRICT_CHK = 12, EINVAL = 22;
const ONE = new Uint8Array(new Int32Array([1]).buffer), ZERO = new Uint8Array(4);
const RTA_DST = 1, RTA_OIF = 4, RTA_GATEWAY = 5, RTA_PRIORITY = 6, RTA_MULTIPATH = 9, RTA_TABLE = 15;
const NDA_DST = 1, NDA_LLADDR = 2, NDA_IFINDEX = 8;
const EOPNOTSUPP = 95;
const RTM_NEWLINK = 16,
  RTM_SETLINK = 19,
  RTM_NEWROUTE = 24,
  RTM_GETROUTE = 26,
  RTM_NEWNEIGH = 28,
  RTM_GETNEIGH = 30;
const RTM_NEWNSID = 88, RTM_GETNSID = 90;
const IFLA_PROTINFO = 12, IFLA_BRPORT_MODE = 4, NLA_F_NESTED = 0x8000;
const NETNSA_NSID = 1, NETNSA_FD = 3;
const IFF_UP = 0x1;
const RTNH_F_ONLINK = 0x4;
const NUD_REACHABLE = 0x02, NUD_NOARP = 0x40, NUD_PERMANENT = 0x80;
const NTF_SELF = 0x02;
const RTNL_BRIDGE_HAIRPIN_MODE = 0x1;
const RTNL_LINK_VXLAN_F_GBP = 0x1;
const IFA_F_NOPREFIXROUTE = 0x200;
const RT_TABLE_MAIN = 254, RT_TABLE_LOCAL = 255, RT_SCOPE_NOWHERE = 255;

function fam(f: number): 4 | 6 | null {
  return f === AF_INET ? 4 : f === AF_INET6 ? 6 : null;
}

/** Text of a libnl error code. */
function geterror(code: number): string {
  return readCString(nl().nl_geterror(code)) ?? `libnl error ${code}`;
}

/** Opens a handle on namespace `ns` (null: the namespace this thread is in). */
export function openLibnl(ns: NetnsRef | null): NetlinkHandle {
  return new LibnlHandle(ns);
}

// A handle that is garbage-collected without close() still frees its socket.
const finalizer = new FinalizationRegistry<bigint>((addr) => {
  const p = Deno.UnsafePointer.create(addr);
  if (p) nl().nl_socket_free(p);
});

class LibnlHandle implements NetlinkHandle {
  readonly netns: NetnsRef | null;
  #sk: Ptr;
  #closed = false;
  /** name → ifindex; cleared on link changes and retried once on "No such device". */
  readonly #ifindex = new Map<string, number>();
  readonly #out = new OutPtr();
  readonly #out2 = new OutPtr();
  readonly #i32 = new Int32Array(1);
  readonly #u32 = new Uint32Array(1);
  readonly #b4 = new Uint8Array(4);
  readonly #b16 = new Uint8Array(16);
  readonly #b6 = new Uint8Array(6);
  /** JS copy of the last receive buffer of a compact scan (grown as needed, reused). */
  #rx = new Uint8Array(64 * 1024);

  constructor(ns: NetnsRef | null) {
    this.netns = ns;
    const sk = inNetns(ns, () => {
      const s = nl().nl_socket_alloc();
      if (s === null) throw new NetlinkError("socket alloc", -NLE.NOMEM, geterror(-NLE.NOMEM));
      const err = nl().nl_connect(s, NETLINK_ROUTE);
      if (err < 0) {
        nl().nl_socket_free(s);
        throw new NetlinkError("netlink connect", err, geterror(err));
      }
      return s;
    });
    // Large dumps (10k routes) in fewer recv() calls.
    nl().nl_socket_set_buffer_size(sk, 1 << 20, 1 << 18);
    // Raw dumps and RTM_GETNSID read their answers themselves (nl_recv), which libnl's expected-sequence
    // counter does not see; requests and answers on this socket are strictly one at a time, in order.
    nl().nl_socket_disable_seq_check(sk);
    // Kernel error texts (extended ack, what iproute2 prints as "Error: ..."), and acks without the echoed
    // request. Best effort: older kernels just ignore them.
    const fd = nl().nl_socket_get_fd(sk);
    const one = new Uint8Array(new Int32Array([1]).buffer);
    libc().setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, one, 4);
    libc().setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, one, 4);
    this.#sk = sk;
    finalizer.register(this, Deno.UnsafePointer.value(sk) as bigint, this);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    finalizer.unregister(this);
    nl().nl_socket_free(this.#sk);
    this.#sk = null;
  }

  // ---------------------------------------------------------------- helpers

  #live(): Ptr {
    if (this.#closed) throw new FlanctlError("netlink handle used after close()");
    return this.#sk;
  }

  #check(err: number, op: () => string): void {
    if (err < 0) throw new NetlinkError(op(), err, geterror(err));
  }

  /** Runs `fn` once more with a fresh name cache when it failed with "No such device". */
  #retry<T>(fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      if (e instanceof NetlinkError && e.code === -NLE.NODEV && this.#ifindex.size > 0) {
        this.#ifindex.clear();
        return fn();
      }
      throw e;
    }
  }

  /** Reads an nl_addr as IP text (null for a NULL or empty address). */
  #ip(a: Ptr): string | null {
    if (a === null) return null;
    const len = nl().nl_addr_get_len(a);
    if (len !== 4 && len !== 16) return null;
    const buf = len === 4 ? this.#b4 : this.#b16;
    Deno.UnsafePointerView.copyInto(nl().nl_addr_get_binary_addr(a)!, buf);
    return formatIP(buf);
  }

  /** Reads an nl_addr holding a 6-byte (or other non-IP) link-layer address. */
  #mac(a: Ptr): string | null {
    if (a === null) return null;
    const len = nl().nl_addr_get_len(a);
    if (len === 0 || len === 4 || len === 16) return null;
    const buf = len === 6 ? this.#b6 : new Uint8Array(len);
    Deno.UnsafePointerView.copyInto(nl().nl_addr_get_binary_addr(a)!, buf);
    return formatMac(buf);
  }

  /** Builds a new nl_addr (caller puts it). */
  #addr(family: number, bytes: Uint8Array<ArrayBuffer>, prefix?: number): NonNullable<Ptr> {
    const a = nl().nl_addr_build(family, bytes, BigInt(bytes.length));
    if (a === null) throw new NetlinkError("address alloc", -NLE.NOMEM, geterror(-NLE.NOMEM));
    if (prefix !== undefined) nl().nl_addr_set_prefixlen(a, prefix);
    return a;
  }

  #ipAddr(s: string, field: string): NonNullable<Ptr> {
    const b = parseIPBytes(s, field);
    return this.#addr(b.length === 4 ? AF_INET : AF_INET6, b);
  }

  /** Allocates a cache with `fill`, iterates it with `each`, always frees it. */
  #dump(
    op: string,
    fill: (out: BigUint64Array<ArrayBuffer>) => number,
    each: (obj: NonNullable<Ptr>) => void,
  ) {
    this.#live();
    const out = this.#out.reset();
    const err = fill(out.buf);
    this.#check(err, () => op);
    const cache = out.value;
    if (cache === null) return;
    try {
      for (let o = nl().nl_cache_get_first(cache); o !== null; o = nl().nl_cache_get_next(o)) each(o);
    } finally {
      nl().nl_cache_free(cache);
    }
  }

  /** ifindex of a link name or number (cached per handle). */
  #index(ref: LinkRef, op: () => string): number {
    if (typeof ref === "number") {
      if (!Number.isInteger(ref) || ref <= 0) throw new ParseError("dev", `bad ifindex ${ref}`);
      return ref;
    }
    if (typeof ref !== "string" || ref === "" || ref.length > 15) {
      throw new ParseError("dev", `bad interface name '${ref}' (1..15 characters)`);
    }
    const hit = this.#ifindex.get(ref);
    if (hit !== undefined) return hit;
    const out = this.#out.reset();
    const err = rt().rtnl_link_get_kernel(this.#live(), 0, cstr(ref), out.buf);
    if (err < 0) {
      if (err === -NLE.NODEV || err === -NLE.OBJ_NOTFOUND) {
        throw new NetlinkError(op(), -NLE.NODEV, geterror(err), `Cannot find device "${ref}"`);
      }
      this.#check(err, op);
    }
    const link = out.value!;
    const idx = rt().rtnl_link_get_ifindex(link);
    rt().rtnl_link_put(link);
    this.#ifindex.set(ref, idx);
    return idx;
  }

  /** A NetlinkError for a kernel errno (with its extended-ack text). */
  #kernelError(op: string, errno: number, message: string | null): NetlinkError {
    const code = errnoToNle(errno);
    return new NetlinkError(op, code, geterror(code), errnoText(errno), { errno, message });
  }

  /**
   * Reads answers until the ack of the request just sent. Returns 0, or the kernel's errno (positive)
   * and its extended-ack message. Messages before the ack are handed to `each` (RTM_GETNSID answers).
   */
  #readAck(
    op: () => string,
    each?: (p: NonNullable<Ptr>, type: number, len: number) => void,
  ): [number, string | null] {
    const sk = this.#live();
    const addr = new Uint8Array(12);
    const out = this.#out;
    const head = new Uint8Array(20);
    const hv = new DataView(head.buffer);
    for (;;) {
      out.reset();
      const n = nl().nl_recv(sk, addr, out.buf, null);
      if (n < 0) this.#check(n, op);
      const buf = out.value;
      if (buf === null) continue;
      try {
        for (let off = 0; off + 16 <= n;) {
          const p = Deno.UnsafePointer.offset(buf, off)!;
          Deno.UnsafePointerView.copyInto(p, head.subarray(0, Math.min(20, n - off)));
          const len = hv.getUint32(0, true), type = hv.getUint16(4, true), flags = hv.getUint16(6, true);
          if (len < 16 || off + len > n) break;
          if (type === NLMSG_ERROR) {
            const err = -hv.getInt32(16, true);
            let msg: string | null = null;
            if (err !== 0 && flags & NLM_F_ACK_TLVS) msg = this.#extack(p, len, flags);
            return [err, msg];
          }
          each?.(p, type, len);
          off += (len + 3) & ~3;
        }
      } finally {
        libc().free(buf);
      }
    }
  }

  /** NLMSGERR_ATTR_MSG of an NLMSG_ERROR message at `p` (length `len`), or null. */
  #extack(p: NonNullable<Ptr>, len: number, flags: number): string | null {
    const bytes = new Uint8Array(len);
    Deno.UnsafePointerView.copyInto(p, bytes);
    const dv = new DataView(bytes.buffer);
    const echoed = flags & NLM_F_CAPPED ? 16 : dv.getUint32(20, true);
    for (let a = 20 + ((echoed + 3) & ~3); a + 4 <= len;) {
      const alen = dv.getUint16(a, true), atype = dv.getUint16(a + 2, true) & 0x3fff;
      if (alen < 4) break;
      if (atype === NLMSGERR_ATTR_MSG) {
        const text = new TextDecoder().decode(bytes.subarray(a + 4, a + alen)).replace(/\0.*$/s, "");
        return text || null;
      }
      a += (alen + 3) & ~3;
    }
    return null;
  }

  /**
   * Builds a request with `build` (an rtnl_*_build_*_request call storing an nl_msg), sends it, waits for
   * the kernel's ack and frees the message. With `setlinkFallback`, an RTM_NEWLINK the kernel refuses with
   * EOPNOTSUPP is re-sent as RTM_SETLINK (what rtnl_link_change does).
   */
  #transact(op: () => string, build: (out: BigUint64Array<ArrayBuffer>) => number, setlinkFallback = false) {
    const sk = this.#live();
    const out = this.#out.reset();
    this.#check(build(out.buf), op);
    const msg = out.value;
    if (msg === null) throw new NetlinkError(op(), -NLE.NOMEM, geterror(-NLE.NOMEM));
    try {
      for (;;) {
        this.#check(nl().nl_send_auto(sk, msg), op);
        const [err, text] = this.#readAck(op);
        if (err === 0) return;
        if (setlinkFallback && err === EOPNOTSUPP) {
          const hv = new Deno.UnsafePointerView(nl().nlmsg_hdr(msg)!);
          if (hv.getUint16(4) === RTM_NEWLINK) {
            const fix = new Uint8Array(new Uint16Array([RTM_SETLINK]).buffer);
            patch(nl().nlmsg_hdr(msg)!, 4, fix);
            patch(nl().nlmsg_hdr(msg)!, 8, new Uint8Array(4)); // NL_AUTO_SEQ: a fresh sequence number
            continue;
          }
        }
        throw this.#kernelError(op(), err, text);
      }
    } finally {
      nl().nlmsg_free(msg);
    }
  }

  #names(): Map<number, string> {
    const m = new Map<number, string>();
    this.#dump("link show", (out) => rt().rtnl_link_alloc_cache(this.#sk, AF_UNSPEC, out), (o) => {
      m.set(rt().rtnl_link_get_ifindex(o), readCString(rt().rtnl_link_get_name(o)) ?? "");
    });
    return m;
  }

  /**
   * Dumps `type` (RTM_GETROUTE/RTM_GETNEIGH) with header `hdr` and hands every answer message to `each`
   * as a pointer to its nlmsghdr. Used instead of libnl caches where the cache would merge distinct
   * kernel objects (IPv6 routes differing only in next hop, FDB entries per remote).
   */
  #rawDump(
    op: string,
    type: number,
    hdr: Uint8Array<ArrayBuffer>,
    each: (nlh: NonNullable<Ptr>, type: number) => void,
  ) {
    const sk = this.#live();
    // No NLM_F_ACK on a dump: the kernel would queue an ack after NLMSG_DONE for the next reader.
    nl().nl_socket_disable_auto_ack(sk);
    const sent = nl().nl_send_simple(sk, type, NLM_F_DUMP, hdr, BigInt(hdr.length));
    nl().nl_socket_enable_auto_ack(sk);
    this.#check(sent, () => op);
    const addr = new Uint8Array(12);
    const out = this.#out;
    const head = new Uint8Array(16);
    const hv = new DataView(head.buffer);
    for (;;) {
      out.reset();
      const n = nl().nl_recv(sk, addr, out.buf, null);
      if (n < 0) this.#check(n, () => op);
      const buf = out.value;
      if (buf === null) continue;
      let done = false;
      try {
        for (let off = 0; off + 16 <= n;) {
          const p = Deno.UnsafePointer.offset(buf, off)!;
          Deno.UnsafePointerView.copyInto(p, head);
          const len = hv.getUint32(0, true);
          const t = hv.getUint16(4, true);
          if (len < 16 || off + len > n) break;
          if (t === NLMSG_DONE) {
            done = true;
            break;
          }
          if (t === NLMSG_ERROR) {
            const e = new Int32Array(1);
            Deno.UnsafePointerView.copyInto(Deno.UnsafePointer.offset(p, 16)!, new Uint8Array(e.buffer));
            if (e[0] < 0) {
              throw this.#kernelError(op, -e[0], null);
            }
            done = true;
            break;
          }
          each(p, t);
          off += (len + 3) & ~3;
        }
      } finally {
        libc().free(buf);
      }
      if (done) return;
    }
  }

  // ---------------------------------------------------------------- reading

  links(): LinkInfo[] {
    const list: LinkInfo[] = [];
    this.#dump("link show", (out) => rt().rtnl_link_alloc_cache(this.#live(), AF_UNSPEC, out), (o) => {
      list.push(this.#linkInfo(o));
    });
    // iproute2 appends "M-DOWN" when the parent link (same namespace) is down.
    const upByIndex = new Map(list.map((l) => [l.index, l.up]));
    for (const l of list) {
      if (l.parent !== null && l.linkNetnsId === null && upByIndex.get(l.parent) !== true) {
        l.flags.push("M-DOWN");
      }
    }
    this.#addBridgePorts(list);
    return list;
  }

  /**
   * One link by name or ifindex: a single RTM_GETLINK (rtnl_link_get_kernel), not a dump of every link, so
   * the cost does not grow with the number of links (a CNI host has one veth per pod). The parent (for
   * M-DOWN) and the master (is it a bridge?) are fetched the same way; only a bridge port pays for the
   * AF_BRIDGE dump that carries its hairpin flag, as in links().
   */
  link(ref: LinkRef): LinkInfo | null {
    const info = this.#getLink(ref);
    if (info === null) return null;
    if (info.parent !== null && info.linkNetnsId === null && this.#getLink(info.parent)?.up !== true) {
      info.flags.push("M-DOWN");
    }
    if (info.master !== null && this.#getLink(info.master)?.kind === "bridge") {
      const withMaster = [info, { ...info, index: info.master, kind: "bridge", master: null }];
      this.#addBridgePorts(withMaster);
    }
    return info;
  }

  /** RTM_GETLINK of one link; null when there is no such link (or `ref` cannot name one). */
  #getLink(ref: LinkRef): LinkInfo | null {
    const byIndex = typeof ref === "number";
    if (
      byIndex ? !Number.isInteger(ref) || ref <= 0 : typeof ref !== "string" || ref === "" || ref.length > 15
    ) {
      return null;
    }
    const out = this.#out.reset();
    const err = rt().rtnl_link_get_kernel(
      this.#live(),
      byIndex ? ref : 0,
      byIndex ? null : cstr(ref),
      out.buf,
    );
    if (err === -NLE.OBJ_NOTFOUND || err === -NLE.NODEV) return null;
    this.#check(err, () => `link show dev ${ref}`);
    const o = out.value;
    if (o === null) return null;
    try {
      return this.#linkInfo(o);
    } finally {
      rt().rtnl_link_put(o);
    }
  }

  #linkInfo(o: NonNullable<Ptr>): LinkInfo {
    const r = rt();
    const flags = r.rtnl_link_get_flags(o);
    const master = r.rtnl_link_get_master(o);
    const parent = r.rtnl_link_get_link(o);
    const kind = readCString(r.rtnl_link_get_type(o));
    const info: LinkInfo = {
      index: r.rtnl_link_get_ifindex(o),
      name: readCString(r.rtnl_link_get_name(o)) ?? "",
      kind,
      flags: linkFlagNames(flags),
      up: (flags & IFF_UP) !== 0,
      operstate: operstateName(r.rtnl_link_get_operstate(o)),
      mtu: r.rtnl_link_get_mtu(o),
      mac: this.#mac(r.rtnl_link_get_addr(o)),
      master: master > 0 ? master : null,
      parent: parent > 0 ? parent : null,
      linkNetnsId: r.rtnl_link_get_link_netnsid(o, this.#i32) === 0 ? this.#i32[0] : null,
    };
    if (kind === "vxlan") info.vxlan = this.#vxlanInfo(o);
    return info;
  }

  #vxlanInfo(o: NonNullable<Ptr>): VxlanInfo {
    const r = rt();
    const u = this.#u32;
    const vni = r.rtnl_link_vxlan_get_id(o, u) === 0 ? u[0] : 0;
    const port = r.rtnl_link_vxlan_get_port(o, u) === 0 ? u[0] : 0;
    const dev = r.rtnl_link_vxlan_get_link(o, u) === 0 && u[0] > 0 ? u[0] : null;
    const gbp = r.rtnl_link_vxlan_get_flags(o, u) === 0 && (u[0] & RTNL_LINK_VXLAN_F_GBP) !== 0;
    let local: string | null = null;
    const out = this.#out.reset();
    if (r.rtnl_link_vxlan_get_local(o, out.buf) === 0 && out.value !== null) {
      const a = out.value;
      try {
        local = this.#ip(a);
      } finally {
        nl().nl_addr_put(a);
      }
    }
    return { vni, port, local, dev, learning: r.rtnl_link_vxlan_get_learning(o) > 0, gbp };
  }

  /** Fills `bridgePort` (hairpin) of links enslaved to a bridge, from an AF_BRIDGE link dump. */
  #addBridgePorts(list: LinkInfo[]): void {
    const bridges = new Set(list.filter((l) => l.kind === "bridge").map((l) => l.index));
    const ports = list.filter((l) => l.master !== null && bridges.has(l.master));
    if (ports.length === 0) return;
    const hairpin = new Map<number, boolean>();
    this.#dump("bridge link show", (out) => rt().rtnl_link_alloc_cache(this.#sk, AF_BRIDGE, out), (o) => {
      const f = rt().rtnl_link_bridge_get_flags(o);
      if (f >= 0) hairpin.set(rt().rtnl_link_get_ifindex(o), (f & RTNL_BRIDGE_HAIRPIN_MODE) !== 0);
    });
    for (const p of ports) p.bridgePort = { hairpin: hairpin.get(p.index) ?? false };
  }

  addrs(family?: 4 | 6): AddrInfo[] {
    const names = this.#names();
    const list: AddrInfo[] = [];
    this.#dump("address show", (out) => rt().rtnl_addr_alloc_cache(this.#live(), out), (o) => {
      const r = rt();
      const f = fam(r.rtnl_addr_get_family(o));
      if (f === null || (family && f !== family)) return;
      const index = r.rtnl_addr_get_ifindex(o);
      list.push({
        index,
        ifname: names.get(index) ?? "",
        family: f,
        local: this.#ip(r.rtnl_addr_get_local(o)) ?? "",
        prefix: r.rtnl_addr_get_prefixlen(o),
        scope: addrScopeName(r.rtnl_addr_get_scope(o)),
      });
    });
    return list;
  }

  routes(opts: { family?: 4 | 6; table?: number } = {}): RouteInfo[] {
    const names = this.#names();
    const af = opts.family === 4 ? AF_INET : opts.family === 6 ? AF_INET6 : AF_UNSPEC;
    const list: RouteInfo[] = [];
    const rtmsg = new Uint8Array(12);
    rtmsg[0] = af;
    const parsed = this.#out2;
    this.#rawDump("route show", RTM_GETROUTE, rtmsg, (nlh, type) => {
      if (type !== RTM_NEWROUTE) return;
      if (rt().rtnl_route_parse(nlh, parsed.reset().buf) < 0 || parsed.value === null) return;
      const o = parsed.value;
      try {
        this.#routeInfos(o, opts, names, list);
      } finally {
        rt().rtnl_route_put(o);
      }
    });
    return list;
  }

  #routeInfos(
    o: NonNullable<Ptr>,
    opts: { table?: number },
    names: Map<number, string>,
    list: RouteInfo[],
  ): void {
    {
      const r = rt();
      const f = fam(r.rtnl_route_get_family(o));
      if (f === null) return;
      const table = r.rtnl_route_get_table(o);
      if (opts.table !== undefined ? table !== opts.table : table === RT_TABLE_LOCAL) return;
      const d = r.rtnl_route_get_dst(o);
      const plen = d === null ? 0 : nl().nl_addr_get_prefixlen(d);
      const dst = plen === 0 ? "default" : `${this.#ip(d) ?? (f === 4 ? "0.0.0.0" : "::")}/${plen}`;
      const base = {
        family: f,
        dst,
        scope: routeScopeName(r.rtnl_route_get_scope(o)),
        table,
        protocol: protocolName(r.rtnl_route_get_protocol(o)),
        type: routeTypeName(r.rtnl_route_get_type(o)),
        prefsrc: this.#ip(r.rtnl_route_get_pref_src(o)),
        metric: r.rtnl_route_get_priority(o) || null,
      };
      // libnl merges IPv6 routes that differ only in next hop (and multipath routes carry several):
      // one RouteInfo per next hop, as iproute2 shows separate IPv6 routes.
      const nnh = r.rtnl_route_get_nnexthops(o);
      if (nnh === 0) {
        list.push({ ...base, gateway: null, dev: null, devName: null, flags: [] });
        return;
      }
      for (let i = 0; i < nnh; i++) {
        const nh = r.rtnl_route_nexthop_n(o, i);
        if (nh === null) continue;
        const idx = r.rtnl_route_nh_get_ifindex(nh);
        const dev = idx > 0 ? idx : null;
        list.push({
          ...base,
          gateway: this.#ip(r.rtnl_route_nh_get_gateway(nh)),
          dev,
          devName: dev === null ? null : names.get(dev) ?? null,
          flags: nexthopFlagNames(r.rtnl_route_nh_get_flags(nh)),
        });
      }
    }
  }

  neighbours(family?: 4 | 6): NeighInfo[] {
    const names = this.#names();
    const list: NeighInfo[] = [];
    this.#neighDump("neigh show", family === 4 ? AF_INET : family === 6 ? AF_INET6 : AF_UNSPEC, (o) => {
      const r = rt();
      const f = fam(r.rtnl_neigh_get_family(o));
      if (f === null || (family && f !== family)) return;
      const index = r.rtnl_neigh_get_ifindex(o);
      list.push({
        family: f,
        index,
        ifname: names.get(index) ?? "",
        dst: this.#ip(r.rtnl_neigh_get_dst(o)) ?? "",
        lladdr: this.#mac(r.rtnl_neigh_get_lladdr(o)),
        state: nudNames(r.rtnl_neigh_get_state(o)),
      });
    });
    return list;
  }

  fdb(): FdbInfo[] {
    const names = this.#names();
    const list: FdbInfo[] = [];
    this.#neighDump("fdb show", AF_BRIDGE, (o) => {
      const r = rt();
      if (r.rtnl_neigh_get_family(o) !== AF_BRIDGE) return;
      const index = r.rtnl_neigh_get_ifindex(o);
      const master = r.rtnl_neigh_get_master(o);
      const vlan = r.rtnl_neigh_get_vlan(o);
      list.push({
        index,
        ifname: names.get(index) ?? "",
        mac: this.#mac(r.rtnl_neigh_get_lladdr(o)) ?? "",
        dst: this.#ip(r.rtnl_neigh_get_dst(o)),
        master: master > 0 ? master : null,
        flags: ntfNames(r.rtnl_neigh_get_flags(o)),
        state: nudNames(r.rtnl_neigh_get_state(o)),
        vlan: vlan >= 0 ? vlan : null,
      });
    });
    return list;
  }

  /** RTM_GETNEIGH dump of `family`; each parsed neighbour goes to `each`, then is released. */
  #neighDump(op: string, family: number, each: (o: NonNullable<Ptr>) => void): void {
    const ndmsg = new Uint8Array(12);
    ndmsg[0] = family;
    const parsed = this.#out2;
    this.#rawDump(op, RTM_GETNEIGH, ndmsg, (nlh, type) => {
      if (type !== RTM_NEWNEIGH) return;
      if (rt().rtnl_neigh_parse(nlh, parsed.reset().buf) < 0 || parsed.value === null) return;
      const o = parsed.value;
      try {
        each(o);
      } finally {
        rt().rtnl_neigh_put(o);
      }
    });
  }

  // ---------------------------------------------------------------- links: create

  #addLink(link: NonNullable<Ptr>, op: () => string): void {
    this.#transact(op, (out) => rt().rtnl_link_build_add_request(link, NLM_F_CREATE | NLM_F_EXCL, out));
  }

  #setCommon(link: NonNullable<Ptr>, name: string, opts: { mtu?: number; mac?: string }, what = "mac"): void {
    checkName(name, "name");
    rt().rtnl_link_set_name(link, cstr(name));
    if (opts.mtu !== undefined) rt().rtnl_link_set_mtu(link, checkMtu(opts.mtu));
    if (opts.mac !== undefined) {
      const a = this.#addr(AF_LLC, parseMac(opts.mac, what));
      rt().rtnl_link_set_addr(link, a);
      nl().nl_addr_put(a);
    }
  }

  #createSimple(kind: string, name: string, opts: { mtu?: number; mac?: string }): void {
    const op = () => `link add ${name} type ${kind}`;
    const link = rt().rtnl_link_alloc()!;
    try {
      this.#setCommon(link, name, opts);
      this.#check(rt().rtnl_link_set_type(link, cstr(kind)), op);
      this.#addLink(link, op);
    } finally {
      rt().rtnl_link_put(link);
    }
  }

  createBridge(name: string, opts: { mtu?: number; mac?: string } = {}): void {
    this.#createSimple("bridge", name, opts);
  }

  createDummy(name: string, opts: { mtu?: number; mac?: string } = {}): void {
    this.#createSimple("dummy", name, opts);
  }

  createVxlan(
    name: string,
    opts: {
      vni: number;
      port?: number;
      local?: string;
      dev?: LinkRef;
      learning?: boolean;
      gbp?: boolean;
      mtu?: number;
      mac?: string;
    },
  ): void {
    if (!Number.isInteger(opts.vni) || opts.vni < 0 || opts.vni > 0xffffff) {
      throw new ParseError("vni", `${opts.vni} is not a VXLAN id (0..16777215)`);
    }
    if (opts.port !== undefined && (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535)) {
      throw new ParseError("port", `${opts.port} is not a UDP port (0..65535)`);
    }
    const op = () =>
      `link add ${name} type vxlan id ${opts.vni}` + (opts.local ? ` local ${opts.local}` : "") +
      (opts.dev !== undefined ? ` dev ${opts.dev}` : "") + (opts.port ? ` dstport ${opts.port}` : "") +
      (opts.learning === false ? " nolearning" : "");
    this.#retry(() => {
      const devIndex = opts.dev !== undefined ? this.#index(opts.dev, op) : undefined;
      const r = rt();
      const link = r.rtnl_link_vxlan_alloc();
      if (link === null) throw new NetlinkError(op(), -NLE.NOMEM, geterror(-NLE.NOMEM));
      try {
        this.#setCommon(link, name, opts);
        this.#check(r.rtnl_link_vxlan_set_id(link, opts.vni), op);
        if (opts.port) this.#check(r.rtnl_link_vxlan_set_port(link, opts.port), op);
        if (opts.local !== undefined) {
          const a = this.#ipAddr(opts.local, "local");
          try {
            this.#check(r.rtnl_link_vxlan_set_local(link, a), op);
          } finally {
            nl().nl_addr_put(a);
          }
        }
        if (devIndex !== undefined) this.#check(r.rtnl_link_vxlan_set_link(link, devIndex), op);
        if (opts.learning !== undefined) {
          this.#check(r.rtnl_link_vxlan_set_learning(link, opts.learning ? 1 : 0), op);
        }
        if (opts.gbp) this.#check(r.rtnl_link_vxlan_set_flags(link, RTNL_LINK_VXLAN_F_GBP, 1), op);
        this.#addLink(link, op);
      } finally {
        r.rtnl_link_put(link);
      }
    });
  }

  createVeth(
    name: string,
    peerName: string,
    opts: { peerNetns?: NetnsRef; mtu?: number; mac?: string; peerMac?: string; txqlen?: number } = {},
  ): void {
    const op = () =>
      `link add ${name} type veth peer name ${peerName}` +
      (opts.peerNetns ? ` netns ${netnsLabel(opts.peerNetns)}` : "") +
      (opts.txqlen !== undefined ? ` txqueuelen ${opts.txqlen}` : "");
    const { txqlen } = opts;
    if (txqlen !== undefined && (!Number.isInteger(txqlen) || txqlen < 0 || txqlen > 0xffffffff)) {
      throw new ParseError("txqlen", `bad txqueuelen ${txqlen} (0..4294967295)`);
    }
    const r = rt();
    const fd = opts.peerNetns ? openNetnsFd(opts.peerNetns) : -1;
    const veth = r.rtnl_link_veth_alloc();
    if (veth === null) {
      closeFd(fd);
      throw new NetlinkError(op(), -NLE.NOMEM, geterror(-NLE.NOMEM));
    }
    const peer = r.rtnl_link_veth_get_peer(veth);
    try {
      this.#setCommon(veth, name, { mtu: opts.mtu, mac: opts.mac });
      this.#setCommon(peer!, peerName, { mtu: opts.mtu, mac: opts.peerMac }, "peerMac");
      if (txqlen !== undefined) {
        r.rtnl_link_set_txqlen(veth, txqlen);
        r.rtnl_link_set_txqlen(peer, txqlen);
      }
      if (fd >= 0) r.rtnl_link_set_ns_fd(peer, fd);
      this.#addLink(veth, op);
    } finally {
      r.rtnl_link_put(peer);
      r.rtnl_link_put(veth); // frees the peer's own reference too (veth_free)
      closeFd(fd);
    }
  }

  // ---------------------------------------------------------------- links: change

  /** rtnl_link_change on ifindex of `ref` with the changes `set` makes. */
  #change(ref: LinkRef, op: () => string, set: (changes: NonNullable<Ptr>) => void): void {
    this.#retry(() => {
      const index = this.#index(ref, op);
      const r = rt();
      const orig = r.rtnl_link_alloc()!;
      const changes = r.rtnl_link_alloc()!;
      try {
        r.rtnl_link_set_ifindex(orig, index);
        set(changes);
        this.#transact(op, (out) => r.rtnl_link_build_change_request(orig, changes, 0, out), true);
      } finally {
        r.rtnl_link_put(changes);
        r.rtnl_link_put(orig);
      }
    });
  }

  setUp(ref: LinkRef, up: boolean): void {
    this.#change(ref, () => `link set dev ${ref} ${up ? "up" : "down"}`, (c) => {
      if (up) rt().rtnl_link_set_flags(c, IFF_UP);
      else rt().rtnl_link_unset_flags(c, IFF_UP);
    });
  }

  setMtu(ref: LinkRef, mtu: number): void {
    checkMtu(mtu);
    this.#change(ref, () => `link set dev ${ref} mtu ${mtu}`, (c) => rt().rtnl_link_set_mtu(c, mtu));
  }

  setMac(ref: LinkRef, mac: string): void {
    const bytes = parseMac(mac);
    this.#change(ref, () => `link set dev ${ref} address ${mac}`, (c) => {
      const a = this.#addr(AF_LLC, bytes);
      rt().rtnl_link_set_addr(c, a);
      nl().nl_addr_put(a);
    });
  }

  setMaster(ref: LinkRef, master: LinkRef | null): void {
    const op = () => `link set dev ${ref} ${master === null ? "nomaster" : `master ${master}`}`;
    this.#retry(() => {
      const m = master === null ? 0 : this.#index(master, op);
      this.#change(ref, op, (c) => rt().rtnl_link_set_master(c, m));
    });
  }

  setHairpin(ref: LinkRef, on: boolean): void {
    const op = () => `link set dev ${ref} type bridge_slave hairpin ${on ? "on" : "off"}`;
    this.#retry(() => {
      const index = this.#index(ref, op);
      // libnl has no setter for bridge port flags on a plain link; send what `bridge link set` sends:
      // RTM_SETLINK, family AF_BRIDGE, IFLA_PROTINFO (nested) { IFLA_BRPORT_MODE u8 }.
      const ifi = new Uint8Array(16);
      new DataView(ifi.buffer).setUint8(0, AF_BRIDGE);
      new DataView(ifi.buffer).setInt32(4, index, true);
      this.#request(RTM_SETLINK, ifi, op, (msg) => {
        const nest = nl().nla_nest_start(msg, IFLA_PROTINFO | NLA_F_NESTED);
        if (nest === null) return -NLE.MSGSIZE;
        const e = nl().nla_put(msg, IFLA_BRPORT_MODE, 1, new Uint8Array([on ? 1 : 0]));
        if (e < 0) return e;
        return nl().nla_nest_end(msg, nest);
      });
    });
  }

  moveToNetns(ref: LinkRef, netns: NetnsRef, newName?: string): void {
    if (newName !== undefined) checkName(newName, "newName");
    const op = () => `link set dev ${ref} netns ${netnsLabel(netns)}${newName ? ` name ${newName}` : ""}`;
    const fd = openNetnsFd(netns);
    try {
      this.#change(ref, op, (c) => {
        rt().rtnl_link_set_ns_fd(c, fd);
        if (newName !== undefined) rt().rtnl_link_set_name(c, cstr(newName));
      });
    } finally {
      closeFd(fd);
      this.#ifindex.clear();
    }
  }

  deleteLink(ref: LinkRef): void {
    const op = () => `link del dev ${ref}`;
    try {
      this.#retry(() => {
        const index = this.#index(ref, op);
        const link = rt().rtnl_link_alloc()!;
        try {
          rt().rtnl_link_set_ifindex(link, index);
          this.#transact(op, (out) => rt().rtnl_link_build_delete_request(link, out));
        } finally {
          rt().rtnl_link_put(link);
        }
      });
    } finally {
      this.#ifindex.clear();
    }
  }

  // ---------------------------------------------------------------- addresses

  /** Builds an address object for `cidr` on `ref`, lets `fill` add to it, sends it with `send`, frees it. */
  #addrObj(
    ref: LinkRef,
    cidr: string,
    op: () => string,
    build: (obj: NonNullable<Ptr>, out: BigUint64Array<ArrayBuffer>) => number,
    fill?: (obj: NonNullable<Ptr>) => void,
  ): void {
    const p = parsePrefix(cidr, "cidr");
    this.#retry(() => {
      const index = this.#index(ref, op);
      const r = rt();
      const obj = r.rtnl_addr_alloc()!;
      try {
        const local = this.#addr(p.family === 4 ? AF_INET : AF_INET6, p.bytes, p.prefix);
        r.rtnl_addr_set_ifindex(obj, index);
        const e = r.rtnl_addr_set_local(obj, local);
        nl().nl_addr_put(local);
        this.#check(e, op);
        r.rtnl_addr_set_prefixlen(obj, p.prefix);
        fill?.(obj);
        this.#transact(op, (out) => build(obj, out));
      } finally {
        r.rtnl_addr_put(obj);
      }
    });
  }

  addAddr(
    ref: LinkRef,
    cidr: string,
    opts: { scope?: "universe" | "link" | "host"; noprefixroute?: boolean; broadcast?: boolean } = {},
  ): void {
    const scope = scopeValue(opts.scope, "scope");
    const op = () =>
      `address add ${cidr}` + (opts.broadcast ? " brd +" : "") + ` dev ${ref}` +
      (opts.noprefixroute ? " noprefixroute" : "");
    // `brd +`: the subnet's last address, for IPv4 subnets that have one (prefix < 31), as iproute2 and
    // the Go netlink library (CNI plugins) set it.
    let brd: Uint8Array<ArrayBuffer> | null = null;
    if (opts.broadcast) {
      const p = parsePrefix(cidr, "cidr");
      if (p.family === 4 && p.prefix < 31) {
        const host = p.prefix === 0 ? 0xffffffff : (1 << (32 - p.prefix)) - 1;
        const v = (new DataView(p.bytes.buffer, p.bytes.byteOffset, 4).getUint32(0) | host) >>> 0;
        brd = new Uint8Array(4);
        new DataView(brd.buffer).setUint32(0, v);
      }
    }
    this.#addrObj(
      ref,
      cidr,
      op,
      (obj, out) => rt().rtnl_addr_build_add_request(obj, NLM_F_EXCL, out),
      (a) => {
        rt().rtnl_addr_set_scope(a, scope);
        if (opts.noprefixroute) rt().rtnl_addr_set_flags(a, IFA_F_NOPREFIXROUTE);
        if (brd !== null) {
          const b = this.#addr(AF_INET, brd);
          const e = rt().rtnl_addr_set_broadcast(a, b);
          nl().nl_addr_put(b);
          this.#check(e, op);
        }
      },
    );
  }

  delAddr(ref: LinkRef, cidr: string): void {
    const op = () => `address del ${cidr} dev ${ref}`;
    this.#addrObj(ref, cidr, op, (obj, out) => rt().rtnl_addr_build_delete_request(obj, 0, out));
  }

  // ---------------------------------------------------------------- routes

  #routeOp(verb: string, r: RouteSpec): string {
    return `route ${verb} ${r.dst}` + (r.via ? ` via ${r.via}` : "") +
      (r.dev !== undefined ? ` dev ${r.dev}` : "") + (r.onlink ? " onlink" : "") +
      (r.scope ? ` scope ${r.scope}` : "") +
      (r.table !== undefined && r.table !== RT_TABLE_MAIN ? ` table ${r.table}` : "") +
      (r.metric !== undefined ? ` metric ${r.metric}` : "");
  }

  /** Builds a route object from `spec` and hands it to `send`; frees it. */
  #withRoute(
    spec: RouteSpec,
    forDelete: boolean,
    op: () => string,
    build: (route: NonNullable<Ptr>, out: BigUint64Array<ArrayBuffer>) => number,
  ) {
    if (!spec || typeof spec.dst !== "string") throw new ParseError("dst", "missing route destination");
    const via = spec.via !== undefined ? parseIPBytes(spec.via, "via") : null;
    const dst = parsePrefix(spec.dst, "dst", {
      allowDefault: true,
      defaultFamily: via ? (via.length === 4 ? 4 : 6) : 4,
    });
    if (via && (via.length === 4 ? 4 : 6) !== dst.family) {
      throw new ParseError("via", `gateway ${spec.via} is not in the address family of ${spec.dst}`);
    }
    const table = spec.table ?? RT_TABLE_MAIN;
    if (!Number.isInteger(table) || table < 0 || table > 0xffffffff) {
      throw new ParseError("table", `bad table ${table}`);
    }
    const af = dst.family === 4 ? AF_INET : AF_INET6;
    this.#retry(() => {
      const dev = spec.dev !== undefined ? this.#index(spec.dev, op) : null;
      const r = rt();
      const route = r.rtnl_route_alloc()!;
      try {
        const d = this.#addr(af, dst.bytes, dst.prefix);
        const e = r.rtnl_route_set_dst(route, d);
        nl().nl_addr_put(d);
        this.#check(e, op);
        r.rtnl_route_set_table(route, table);
        if (spec.scope !== undefined) r.rtnl_route_set_scope(route, scopeValue(spec.scope, "scope"));
        else if (forDelete) r.rtnl_route_set_scope(route, RT_SCOPE_NOWHERE);
        r.rtnl_route_set_protocol(
          route,
          forDelete && spec.protocol === undefined ? 0 : protocolValue(spec.protocol, "protocol"),
        );
        if (spec.metric !== undefined) {
          if (!Number.isInteger(spec.metric) || spec.metric < 0) {
            throw new ParseError("metric", `bad metric ${spec.metric}`);
          }
          r.rtnl_route_set_priority(route, spec.metric);
        }
        if (spec.src !== undefined) {
          const s = this.#ipAddr(spec.src, "src");
          const e2 = r.rtnl_route_set_pref_src(route, s);
          nl().nl_addr_put(s);
          this.#check(e2, op);
        }
        if (dev !== null || via !== null) {
          const nh = r.rtnl_route_nh_alloc()!;
          if (dev !== null) r.rtnl_route_nh_set_ifindex(nh, dev);
          if (via !== null) {
            const g = this.#addr(af, via);
            r.rtnl_route_nh_set_gateway(nh, g);
            nl().nl_addr_put(g);
          }
          if (spec.onlink) r.rtnl_route_nh_set_flags(nh, RTNH_F_ONLINK);
          r.rtnl_route_add_nexthop(route, nh); // the route owns nh from here
        }
        this.#transact(op, (out) => build(route, out));
      } finally {
        r.rtnl_route_put(route);
      }
    });
  }

  /**
   * `ip route replace`. Without `scope`, the scope is chosen as iproute2 does (link for a route without
   * gateway, universe with one); protocol defaults to "boot" and table to main.
   */
  replaceRoute(spec: RouteSpec): void {
    const op = () => this.#routeOp("replace", spec);
    this.#withRoute(
      spec,
      false,
      op,
      (route, out) => rt().rtnl_route_build_add_request(route, NLM_F_CREATE | NLM_F_REPLACE, out),
    );
  }

  /** `ip route del`: matches any scope/protocol unless given. */
  deleteRoute(spec: RouteSpec): void {
    const op = () => this.#routeOp("del", spec);
    this.#withRoute(spec, true, op, (route, out) => rt().rtnl_route_build_del_request(route, 0, out));
  }

  // ---------------------------------------------------------------- neighbours and FDB

  #neigh(
    op: () => string,
    fill: (n: NonNullable<Ptr>) => void,
    build: (n: NonNullable<Ptr>, out: BigUint64Array<ArrayBuffer>) => number,
    dev: LinkRef,
  ): void {
    this.#retry(() => {
      const index = this.#index(dev, op);
      const r = rt();
      const n = r.rtnl_neigh_alloc()!;
      try {
        r.rtnl_neigh_set_ifindex(n, index);
        fill(n);
        this.#transact(op, (out) => build(n, out));
      } finally {
        r.rtnl_neigh_put(n);
      }
    });
  }

  #setNeighAddr(n: NonNullable<Ptr>, setter: "dst" | "lladdr", a: NonNullable<Ptr>, op: () => string): void {
    try {
      if (setter === "dst") this.#check(rt().rtnl_neigh_set_dst(n, a), op);
      else rt().rtnl_neigh_set_lladdr(n, a);
    } finally {
      nl().nl_addr_put(a);
    }
  }

  replaceNeigh(
    n: { dev: LinkRef; dst: string; lladdr: string; state?: "permanent" | "reachable" | "noarp" },
  ): void {
    const state = n.state ?? "permanent";
    const nud = state === "permanent"
      ? NUD_PERMANENT
      : state === "reachable"
      ? NUD_REACHABLE
      : state === "noarp"
      ? NUD_NOARP
      : -1;
    if (nud < 0) {
      throw new ParseError("state", `unknown neighbour state '${state}' (permanent, reachable, noarp)`);
    }
    const dst = parseIPBytes(n.dst, "dst");
    const mac = parseMac(n.lladdr, "lladdr");
    const op = () => `neigh replace ${n.dst} lladdr ${n.lladdr} dev ${n.dev} nud ${state}`;
    this.#neigh(
      op,
      (obj) => {
        this.#setNeighAddr(obj, "dst", this.#addr(dst.length === 4 ? AF_INET : AF_INET6, dst), op);
        this.#setNeighAddr(obj, "lladdr", this.#addr(AF_LLC, mac), op);
        rt().rtnl_neigh_set_state(obj, nud);
      },
      (obj, out) => rt().rtnl_neigh_build_add_request(obj, NLM_F_CREATE | NLM_F_REPLACE, out),
      n.dev,
    );
  }

  deleteNeigh(n: { dev: LinkRef; dst: string }): void {
    const dst = parseIPBytes(n.dst, "dst");
    const op = () => `neigh del ${n.dst} dev ${n.dev}`;
    this.#neigh(
      op,
      (obj) => {
        this.#setNeighAddr(obj, "dst", this.#addr(dst.length === 4 ? AF_INET : AF_INET6, dst), op);
      },
      (obj, out) => rt().rtnl_neigh_build_delete_request(obj, 0, out),
      n.dev,
    );
  }

  replaceFdb(f: { dev: LinkRef; mac: string; dst: string }): void {
    const mac = parseMac(f.mac, "mac");
    const dst = parseIPBytes(f.dst, "dst");
    const op = () => `fdb replace ${f.mac} dev ${f.dev} dst ${f.dst} self permanent`;
    this.#neigh(
      op,
      (obj) => {
        // Set dst first (it fixes the family to the IP's), then switch the family to AF_BRIDGE.
        this.#setNeighAddr(obj, "dst", this.#addr(dst.length === 4 ? AF_INET : AF_INET6, dst), op);
        rt().rtnl_neigh_set_family(obj, AF_BRIDGE);
        this.#setNeighAddr(obj, "lladdr", this.#addr(AF_LLC, mac), op);
        rt().rtnl_neigh_set_state(obj, NUD_PERMANENT);
        rt().rtnl_neigh_set_flags(obj, NTF_SELF);
      },
      (obj, out) => rt().rtnl_neigh_build_add_request(obj, NLM_F_CREATE | NLM_F_REPLACE, out),
      f.dev,
    );
  }

  deleteFdb(f: { dev: LinkRef; mac: string; dst?: string }): void {
    const mac = parseMac(f.mac, "mac");
    const dst = f.dst !== undefined ? parseIPBytes(f.dst, "dst") : null;
    const op = () => `fdb del ${f.mac} dev ${f.dev}${f.dst ? ` dst ${f.dst}` : ""} self`;
    this.#neigh(
      op,
      (obj) => {
        if (dst) this.#setNeighAddr(obj, "dst", this.#addr(dst.length === 4 ? AF_INET : AF_INET6, dst), op);
        rt().rtnl_neigh_set_family(obj, AF_BRIDGE);
        this.#setNeighAddr(obj, "lladdr", this.#addr(AF_LLC, mac), op);
        rt().rtnl_neigh_set_flags(obj, NTF_SELF);
      },
      (obj, out) => rt().rtnl_neigh_build_delete_request(obj, 0, out),
      f.dev,
    );
  }

  // ---------------------------------------------------------------- compact scans

  /**
   * Sends dump request `type` (header + attributes in `req`) and hands every answer message to `each` as
   * an offset into a JS copy of the receive buffer (one copy per recv(), parsed with a DataView: no libnl
   * object and no FFI call per message). With `strict`, NETLINK_GET_STRICT_CHK is on while the request is
   * processed (rtnetlink handles it during send), so the kernel applies the filters in `req`; kernels
   * without it (< 4.20), or that refuse the strict header, get the plain dump and callers filter here.
   */
  #scan(
    op: string,
    type: number,
    req: Uint8Array<ArrayBuffer>,
    each: (b: Uint8Array, dv: DataView, off: number, len: number) => void,
    tryStrict = true,
  ): void {
    const sk = this.#live();
    const fd = nl().nl_socket_get_fd(sk);
    const strict = tryStrict && libc().setsockopt(fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, ONE, 4) === 0;
    let sent: number;
    try {
      nl().nl_socket_disable_auto_ack(sk);
      sent = nl().nl_send_simple(sk, type, NLM_F_DUMP, req, BigInt(req.length));
      nl().nl_socket_enable_auto_ack(sk);
    } finally {
      if (strict) libc().setsockopt(fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, ZERO, 4);
    }
    this.#check(sent, () => op);
    const addr = new Uint8Array(12);
    const out = this.#out;
    for (;;) {
      out.reset();
      const n = nl().nl_recv(sk, addr, out.buf, null);
      if (n < 0) this.#check(n, () => op);
      const p = out.value;
      if (p === null) continue;
      if (this.#rx.length < n) this.#rx = new Uint8Array(Math.max(n, this.#rx.length * 2));
      const b = this.#rx;
      try {
        Deno.UnsafePointerView.copyInto(p, b.subarray(0, n));
      } finally {
        libc().free(p);
      }
      const dv = new DataView(b.buffer, 0, n);
      for (let off = 0; off + 16 <= n;) {
        const len = dv.getUint32(off, true), t = dv.getUint16(off + 4, true);
        if (len < 16 || off + len > n) break;
        if (t === NLMSG_DONE) return;
        if (t === NLMSG_ERROR) {
          const e = -dv.getInt32(off + 16, true);
          if (e === 0) return;
          if (strict && e === EINVAL) {
            // A strict header this kernel refuses: the plain dump (family only), filtered by the callers.
            const plain = new Uint8Array(12);
            plain[0] = req[0];
            this.#scan(op, type, plain, each, false);
            return;
          }
          throw this.#kernelError(op, e, null);
        }
        if (t === type - 2) each(b, dv, off + 16, len - 16); // RTM_GETx → RTM_NEWx answers
        off += (len + 3) & ~3;
      }
    }
  }

  #ip4or6(b: Uint8Array, off: number, len: number): string | null {
    if (len === 4) return `${b[off]}.${b[off + 1]}.${b[off + 2]}.${b[off + 3]}`;
    if (len === 16) return formatIP(b.subarray(off, off + 16));
    return null;
  }

  scanRoutes(
    opts: { family?: 4 | 6; table?: number; dev?: LinkRef },
    each: (r: Readonly<RouteScanEntry>) => void,
  ): void {
    const op = "route show";
    const oif = opts.dev !== undefined ? this.#index(opts.dev, () => op) : 0;
    // struct rtmsg (12) + RTA_TABLE u32 + RTA_OIF u32, filters for strict dumps.
    const req = new Uint8Array(12 + 8 + 8);
    const rv = new DataView(req.buffer);
    req[0] = opts.family === 4 ? AF_INET : opts.family === 6 ? AF_INET6 : AF_UNSPEC;
    let at = 12;
    if (opts.table !== undefined) {
      req[4] = opts.table < 256 ? opts.table : 0;
      rv.setUint16(at, 8, true),
        rv.setUint16(at + 2, RTA_TABLE, true),
        rv.setUint32(at + 4, opts.table, true);
      at += 8;
    }
    if (oif) {
      rv.setUint16(at, 8, true), rv.setUint16(at + 2, RTA_OIF, true), rv.setUint32(at + 4, oif, true);
      at += 8;
    }
    const e: RouteScanEntry = {
      family: 4,
      dst: "",
      gateway: null,
      dev: null,
      onlink: false,
      table: 0,
      protocol: 0,
      type: 0,
      metric: null,
    };
    this.#scan(op, RTM_GETROUTE, req.slice(0, at), (b, dv, o, len) => {
      const f = fam(b[o]);
      if (f === null || (opts.family && f !== opts.family)) return;
      const dstLen = b[o + 1];
      let table = b[o + 4];
      const flags = dv.getUint32(o + 8, true);
      let dst: string | null = null, gw: string | null = null, dev: number | null = null;
      let metric: number | null = null;
      let mpOff = -1, mpLen = 0;
      for (let a = o + 12; a + 4 <= o + len;) {
        const alen = dv.getUint16(a, true), atype = dv.getUint16(a + 2, true) & 0x3fff;
        if (alen < 4) break;
        const v = a + 4, vlen = alen - 4;
        if (atype === RTA_DST) dst = this.#ip4or6(b, v, vlen);
        else if (atype === RTA_GATEWAY) gw = this.#ip4or6(b, v, vlen);
        else if (atype === RTA_OIF && vlen >= 4) dev = dv.getInt32(v, true);
        else if (atype === RTA_PRIORITY && vlen >= 4) metric = dv.getUint32(v, true);
        else if (atype === RTA_TABLE && vlen >= 4) table = dv.getUint32(v, true);
        else if (atype === RTA_MULTIPATH) [mpOff, mpLen] = [v, vlen];
        a += (alen + 3) & ~3;
      }
      if (opts.table !== undefined ? table !== opts.table : table === RT_TABLE_LOCAL) return;
      e.family = f;
      e.dst = dstLen === 0 ? "default" : `${dst ?? (f === 4 ? "0.0.0.0" : "::")}/${dstLen}`;
      e.table = table;
      e.protocol = b[o + 5];
      e.type = b[o + 7];
      e.metric = metric || null;
      if (mpOff < 0) {
        if (oif && dev !== oif) return;
        e.gateway = gw,
          e.dev = dev !== null && dev > 0 ? dev : null,
          e.onlink = (flags & RTNH_F_ONLINK) !== 0;
        each(e);
        return;
      }
      // struct rtnexthop { u16 len; u8 flags; u8 hops; i32 ifindex; } + attributes (RTA_GATEWAY).
      for (let h = mpOff; h + 8 <= mpOff + mpLen;) {
        const hlen = dv.getUint16(h, true);
        if (hlen < 8) break;
        const hdev = dv.getInt32(h + 4, true);
        let hgw: string | null = null;
        for (let a = h + 8; a + 4 <= h + hlen;) {
          const alen = dv.getUint16(a, true), atype = dv.getUint16(a + 2, true) & 0x3fff;
          if (alen < 4) break;
          if (atype === RTA_GATEWAY) hgw = this.#ip4or6(b, a + 4, alen - 4);
          a += (alen + 3) & ~3;
        }
        if (!oif || hdev === oif) {
          e.gateway = hgw, e.dev = hdev > 0 ? hdev : null, e.onlink = (b[h + 2] & RTNH_F_ONLINK) !== 0;
          each(e);
        }
        h += (hlen + 3) & ~3;
      }
    });
  }

  scanNeighbours(opts: { family?: 4 | 6; dev: LinkRef }, each: (n: Readonly<NeighScanEntry>) => void): void {
    const op = "neigh show";
    const index = this.#index(opts.dev, () => `${op} dev ${opts.dev}`);
    // struct ndmsg (12; ifindex 0 as strict checking wants) + NDA_IFINDEX u32.
    const req = new Uint8Array(20);
    const rv = new DataView(req.buffer);
    req[0] = opts.family === 4 ? AF_INET : opts.family === 6 ? AF_INET6 : AF_UNSPEC;
    rv.setUint16(12, 8, true), rv.setUint16(14, NDA_IFINDEX, true), rv.setUint32(16, index, true);
    const e: NeighScanEntry = { family: 4, index, dst: "", lladdr: null, state: 0 };
    this.#scan(op, RTM_GETNEIGH, req, (b, dv, o, len) => {
      const f = fam(b[o]);
      if (f === null || (opts.family && f !== opts.family) || dv.getInt32(o + 4, true) !== index) return;
      let dst: string | null = null, ll: string | null = null;
      for (let a = o + 12; a + 4 <= o + len;) {
        const alen = dv.getUint16(a, true), atype = dv.getUint16(a + 2, true) & 0x3fff;
        if (alen < 4) break;
        if (atype === NDA_DST) dst = this.#ip4or6(b, a + 4, alen - 4);
        else if (atype === NDA_LLADDR && alen - 4 === 6) ll = formatMac(b.subarray(a + 4, a + 10));
        a += (alen + 3) & ~3;
      }
      if (dst === null) return;
      e.family = f, e.dst = dst, e.lladdr = ll, e.state = dv.getUint16(o + 8, true);
      each(e);
    });
  }

  scanFdb(dev: LinkRef, each: (f: Readonly<FdbScanEntry>) => void): void {
    const op = "fdb show";
    const index = this.#index(dev, () => `${op} dev ${dev}`);
    // struct ndmsg, family AF_BRIDGE, ndm_ifindex = the port/device (the strict FDB dump's filter).
    const req = new Uint8Array(12);
    req[0] = AF_BRIDGE;
    new DataView(req.buffer).setInt32(4, index, true);
    const e: FdbScanEntry = { index, mac: "", dst: null };
    this.#scan(op, RTM_GETNEIGH, req, (b, dv, o, len) => {
      if (b[o] !== AF_BRIDGE || dv.getInt32(o + 4, true) !== index) return;
      let dst: string | null = null, mac: string | null = null;
      for (let a = o + 12; a + 4 <= o + len;) {
        const alen = dv.getUint16(a, true), atype = dv.getUint16(a + 2, true) & 0x3fff;
        if (alen < 4) break;
        if (atype === NDA_DST) dst = this.#ip4or6(b, a + 4, alen - 4);
        else if (atype === NDA_LLADDR && alen - 4 === 6) mac = formatMac(b.subarray(a + 4, a + 10));
        a += (alen + 3) & ~3;
      }
      if (mac === null) return;
      e.mac = mac, e.dst = dst;
      each(e);
    });
  }

  // ---------------------------------------------------------------- ethtool

  txChecksum(name: string): boolean {
    this.#live();
    return getTxChecksum(this.netns, name);
  }

  setTxChecksum(name: string, on: boolean): void {
    this.#live();
    setTxChecksum(this.netns, name, on);
  }

  // ---------------------------------------------------------------- raw requests

  /** Builds a raw request (header `hdr` + attributes from `attrs`) into a new nl_msg stored in `out`. */
  #rawRequest(
    type: number,
    hdr: Uint8Array<ArrayBuffer>,
    attrs: (msg: NonNullable<Ptr>) => number,
    out: BigUint64Array<ArrayBuffer>,
  ): number {
    const msg = nl().nlmsg_alloc_simple(type, NLM_F_REQUEST);
    if (msg === null) return -NLE.NOMEM;
    const err = nl().nlmsg_append(msg, hdr, BigInt(hdr.length), NLMSG_ALIGNTO);
    const err2 = err < 0 ? err : attrs(msg);
    if (err2 < 0) {
      nl().nlmsg_free(msg);
      return err2;
    }
    out[0] = BigInt(Deno.UnsafePointer.value(msg));
    return 0;
  }

  /** Sends a raw request (header `hdr` + attributes from `attrs`) and waits for the kernel's ack. */
  #request(
    type: number,
    hdr: Uint8Array<ArrayBuffer>,
    op: () => string,
    attrs: (msg: NonNullable<Ptr>) => number,
  ): void {
    this.#transact(op, (out) => this.#rawRequest(type, hdr, attrs, out));
  }

  /**
   * The id this namespace uses for the namespace open at `fd` (RTM_GETNSID with NETNSA_FD), or null
   * when none is assigned (the query does not assign one). Not part of {@link NetlinkHandle}; used by
   * veth pairing.
   */
  nsidOf(fd: number): number | null {
    const sk = this.#live();
    const op = () => "netns list-id";
    const out = this.#out.reset();
    // struct rtgenmsg { unsigned char rtgen_family; } (AF_UNSPEC), then NETNSA_FD.
    this.#check(
      this.#rawRequest(RTM_GETNSID, new Uint8Array(1), (msg) => {
        const v = new Uint8Array(new Int32Array([fd]).buffer);
        return nl().nla_put(msg, NETNSA_FD, 4, v);
      }, out.buf),
      op,
    );
    const msg = out.value!;
    let nsid: number | null = null;
    try {
      this.#check(nl().nl_send_auto(sk, msg), op);
    } finally {
      nl().nlmsg_free(msg);
    }
    // The RTM_NEWNSID answer comes before the ack (auto-ack is on).
    const [err, text] = this.#readAck(op, (p, type, len) => {
      if (type !== RTM_NEWNSID) return;
      const bytes = new Uint8Array(len);
      Deno.UnsafePointerView.copyInto(p, bytes);
      const dv = new DataView(bytes.buffer);
      for (let a = 16 + 4; a + 4 <= len;) {
        const alen = dv.getUint16(a, true), atype = dv.getUint16(a + 2, true) & 0x3fff;
        if (alen < 4) break;
        if (atype === NETNSA_NSID && alen >= 8) {
          const id = dv.getInt32(a + 4, true);
          nsid = id >= 0 ? id : null;
        }
        a += (alen + 3) & ~3;
      }
    });
    if (err !== 0) throw this.#kernelError(op(), err, text);
    return nsid;
  }
}

/** The RTM_GETNSID query for handles made by {@link openLibnl} (veth pairing needs it). */
export function nsidOf(h: NetlinkHandle, fd: number): number | null {
  if (!(h instanceof LibnlHandle)) throw new FlanctlError("nsidOf needs a libnl handle");
  return h.nsidOf(fd);
}

/** Overwrites `bytes.length` bytes of native memory at `p + offset` (an nlmsghdr field). */
function patch(p: NonNullable<Ptr>, offset: number, bytes: Uint8Array): void {
  new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(p, offset + bytes.length)).set(bytes, offset);
}

function checkName(name: string, field: string): void {
  if (typeof name !== "string" || name === "" || name.length > 15 || /[\s/:]/.test(name)) {
    throw new ParseError(
      field,
      `'${name}' is not a valid interface name (1..15 characters, no spaces, '/' or ':')`,
    );
  }
}

function checkMtu(mtu: number): number {
  if (!Number.isInteger(mtu) || mtu < 68 || mtu > 65535) {
    throw new ParseError("mtu", `${mtu} is not a valid MTU (68..65535)`);
  }
  return mtu;
}

/** Masks host bits of a CIDR's address (exported for callers that build route specs from addresses). */
export function networkOf(cidr: string): string {
  const p = parsePrefix(cidr, "cidr");
  return `${formatIP(maskBytes(p.bytes, p.prefix))}/${p.prefix}`;
}
