/**
 * RTM_GETNSID: the id a namespace uses for another one (veth pairing needs it).
 * @module
 */
import { nl } from "../sys/ffi.ts";
import { NETNSA_FD, NETNSA_NSID, RTM_GETNSID, RTM_NEWNSID } from "./codec/consts.ts";
import { AttrWalk } from "./codec/attrs.ts";
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
    for (const at = new AttrWalk(dv, 16 + 4, len); at.next();) {
      if (at.type !== NETNSA_NSID || at.vlen < 4) continue;
      const id = dv.getInt32(at.v, true);
      nsid = id >= 0 ? id : null;
    }
  });
  if (err !== 0) throw kernelError(op(), err, text);
  return nsid;
}
