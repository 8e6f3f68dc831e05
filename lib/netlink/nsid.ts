/**
 * RTM_GETNSID: the id a namespace uses for another one (veth pairing needs it).
 * @module
 */
import { nl } from "../sys/ffi.ts";
import { NETNSA_FD, NETNSA_NSID, RTM_GETNSID, RTM_NEWNSID } from "./codec/consts.ts";
import type { Conn } from "./conn.ts";
import { kernelError, rawRequest, readAck } from "./io.ts";

/**
 * The id this namespace uses for the namespace open at `fd` (RTM_GETNSID with NETNSA_FD), or null
 * when none is assigned (the query does not assign one). Not part of {@link NetlinkHandle}; used by
 * veth pairing.
 */
export function nsidOf(c: Conn, fd: number): number | null {
  const sk = c.live();
  const op = () => "netns list-id";
  const out = c.out.reset();
  // struct rtgenmsg { unsigned char rtgen_family; } (AF_UNSPEC), then NETNSA_FD.
  c.check(
    rawRequest(RTM_GETNSID, new Uint8Array(1), (msg) => {
      const v = new Uint8Array(new Int32Array([fd]).buffer);
      return nl().nla_put(msg, NETNSA_FD, 4, v);
    }, out.buf),
    op,
  );
  const msg = out.value!;
  let nsid: number | null = null;
  try {
    c.check(nl().nl_send_auto(sk, msg), op);
  } finally {
    nl().nlmsg_free(msg);
  }
  // The RTM_NEWNSID answer comes before the ack (auto-ack is on).
  const [err, text] = readAck(c, op, (p, type, len) => {
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
  if (err !== 0) throw kernelError(op(), err, text);
  return nsid;
}
