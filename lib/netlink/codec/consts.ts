/**
 * rtnetlink numbers (linux/netlink.h, linux/rtnetlink.h, linux/if_link.h, linux/neighbour.h) and libnl
 * flags: the one place lib/netlink defines them (the OS numbers come from lib/sys/consts.ts; the ones other
 * layers compare, e.g. the main table, are exported through lib/netlink/mod.ts).
 * @module
 */

import { AF_INET, AF_INET6 } from "../../sys/consts.ts";

/** The OS numbers netlink requests use (address families, the socket, errno values): lib/sys/consts.ts. */
export {
  AF_BRIDGE,
  AF_INET,
  AF_INET6,
  AF_LLC,
  AF_NETLINK,
  AF_UNSPEC,
  EEXIST,
  EHOSTUNREACH,
  EINTR,
  EINVAL,
  ENETUNREACH,
  ENODEV,
  ENOENT,
  EOPNOTSUPP,
  ESRCH,
  EXDEV,
  MSG_PEEK,
  MSG_TRUNC,
  SO_RCVBUF,
  SO_SNDBUF,
  SOCK_CLOEXEC,
  SOCK_RAW,
  SOL_SOCKET,
} from "../../sys/consts.ts";
/** The rtnetlink protocol (linux/netlink.h). */
export const NETLINK_ROUTE = 0;
/** nlmsghdr flags (linux/netlink.h). */
export const NLM_F_REQUEST = 0x1,
  NLM_F_ACK = 0x4,
  NLM_F_DUMP = 0x300,
  NLM_F_REPLACE = 0x100,
  NLM_F_EXCL = 0x200,
  NLM_F_CREATE = 0x400;
/** nlmsghdr types, alignment and ack flags (linux/netlink.h). */
export const NLMSG_ERROR = 2, NLMSG_DONE = 3, NLMSG_ALIGNTO = 4, NLM_F_CAPPED = 0x100, NLM_F_ACK_TLVS = 0x200;
/** Netlink socket options and the extended-ack message attribute (linux/netlink.h). */
export const SOL_NETLINK = 270, NETLINK_CAP_ACK = 10, NETLINK_EXT_ACK = 11, NLMSGERR_ATTR_MSG = 1;
/** Strict dump checking (linux/netlink.h); a kernel refusing it answers EINVAL. */
export const NETLINK_GET_STRICT_CHK = 12;
/** int 1 and 0 as setsockopt values. */
export const ONE = new Uint8Array(new Int32Array([1]).buffer), ZERO = new Uint8Array(4);
/** Route attributes (linux/rtnetlink.h). */
export const RTA_DST = 1,
  RTA_SRC = 2,
  RTA_IIF = 3,
  RTA_OIF = 4,
  RTA_GATEWAY = 5,
  RTA_PRIORITY = 6,
  RTA_PREFSRC = 7,
  RTA_MULTIPATH = 9,
  RTA_TABLE = 15;
/** Neighbour attributes (linux/neighbour.h). */
export const NDA_DST = 1, NDA_LLADDR = 2, NDA_IFINDEX = 8;
/** rtnetlink message types (linux/rtnetlink.h). */
export const RTM_NEWLINK = 16,
  RTM_DELLINK = 17,
  RTM_GETLINK = 18,
  RTM_SETLINK = 19,
  RTM_NEWADDR = 20,
  RTM_DELADDR = 21,
  RTM_GETADDR = 22,
  RTM_NEWROUTE = 24,
  RTM_DELROUTE = 25,
  RTM_GETROUTE = 26,
  RTM_NEWNEIGH = 28,
  RTM_DELNEIGH = 29,
  RTM_GETNEIGH = 30,
  RTM_GETNEIGHTBL = 66;
/** RTM_GETROUTE request flags: answer with the table id, with the matched FIB entry (linux/rtnetlink.h). */
export const RTM_F_LOOKUP_TABLE = 0x1000, RTM_F_FIB_MATCH = 0x2000;
/** rtm_flags of a route-cache entry (a PMTU or redirect exception), which a non-strict dump also returns. */
export const RTM_F_CLONED = 0x200;
/** Route types (linux/rtnetlink.h). */
export const RTN_UNICAST = 1, RTN_BLACKHOLE = 6;
/** Route protocols: the kernel's own routes (linux/rtnetlink.h). */
export const RTPROT_KERNEL = 2;
/** Namespace-id message types (linux/rtnetlink.h). */
export const RTM_NEWNSID = 88, RTM_GETNSID = 90;
/** Bridge-port attributes (linux/if_link.h) and the nested-attribute flag. */
export const IFLA_PROTINFO = 12, IFLA_BRPORT_MODE = 4, NLA_F_NESTED = 0x8000;
/** Namespace-id attributes (linux/net_namespace.h). */
export const NETNSA_NSID = 1, NETNSA_FD = 3;
/** Link flags "up" and "running" (linux/if.h). */
export const IFF_UP = 0x1, IFF_RUNNING = 0x40;
/** Link attributes (linux/if_link.h): top level, IFLA_LINKINFO's, a veth's peer, vxlan's IFLA_INFO_DATA. */
export const IFLA_ADDRESS = 1,
  IFLA_IFNAME = 3,
  IFLA_MTU = 4,
  IFLA_LINK = 5,
  IFLA_MASTER = 10,
  IFLA_TXQLEN = 13,
  IFLA_OPERSTATE = 16,
  IFLA_LINKINFO = 18,
  IFLA_NET_NS_FD = 28,
  IFLA_LINK_NETNSID = 37;
export const IFLA_INFO_KIND = 1, IFLA_INFO_DATA = 2, VETH_INFO_PEER = 1;
export const IFLA_VXLAN_ID = 1,
  IFLA_VXLAN_LINK = 3,
  IFLA_VXLAN_LOCAL = 4,
  IFLA_VXLAN_LEARNING = 7,
  IFLA_VXLAN_PORT = 15,
  IFLA_VXLAN_LOCAL6 = 17,
  IFLA_VXLAN_GBP = 23;
/** Address attributes (linux/if_addr.h). */
export const IFA_ADDRESS = 1, IFA_LOCAL = 2, IFA_BROADCAST = 4, IFA_FLAGS = 8;
/** Next-hop flag "onlink" (linux/rtnetlink.h). */
export const RTNH_F_ONLINK = 0x4;
/** Neighbour states (linux/neighbour.h). */
export const NUD_REACHABLE = 0x02, NUD_NOARP = 0x40, NUD_PERMANENT = 0x80;
/** Neighbour flag "self" (linux/neighbour.h). */
export const NTF_SELF = 0x02;
/** libnl bridge-port flag for hairpin mode. */
export const RTNL_BRIDGE_HAIRPIN_MODE = 0x1;
/** libnl vxlan flag for group-based policy. */
export const RTNL_LINK_VXLAN_F_GBP = 0x1;
/** Address flag "noprefixroute" (linux/if_addr.h). */
export const IFA_F_NOPREFIXROUTE = 0x200;
/** Route tables (linux/rtnetlink.h). */
export const RT_TABLE_DEFAULT = 253, RT_TABLE_MAIN = 254, RT_TABLE_LOCAL = 255;
/** Route scopes (linux/rtnetlink.h). */
export const RT_SCOPE_UNIVERSE = 0, RT_SCOPE_LINK = 253, RT_SCOPE_HOST = 254, RT_SCOPE_NOWHERE = 255;

/** 4 or 6 for AF_INET/AF_INET6, null for any other address family. */
export function fam(f: number): 4 | 6 | null {
  return f === AF_INET ? 4 : f === AF_INET6 ? 6 : null;
}
