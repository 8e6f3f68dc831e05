/**
 * rtnetlink numbers (linux/netlink.h, linux/rtnetlink.h, linux/if_link.h, linux/neighbour.h) and libnl
 * flags shared by the modules of the libnl handle.
 * @module
 */

/** Address families (linux/socket.h). */
export const AF_UNSPEC = 0, AF_INET = 2, AF_BRIDGE = 7, AF_INET6 = 10, AF_LLC = 26;
/** The rtnetlink protocol (linux/netlink.h). */
export const NETLINK_ROUTE = 0;
/** socket(2) arguments for a netlink socket (linux/socket.h, linux/net.h). */
export const AF_NETLINK = 16, SOCK_RAW = 3, SOCK_CLOEXEC = 0o2000000;
/** Socket buffer options (asm-generic/socket.h) and recv(2) flags. */
export const SOL_SOCKET = 1, SO_SNDBUF = 7, SO_RCVBUF = 8, MSG_PEEK = 0x2, MSG_TRUNC = 0x20;
/** An interrupted system call (asm-generic/errno-base.h). */
export const EINTR = 4;
/** nlmsghdr flags (linux/netlink.h). */
export const NLM_F_REQUEST = 0x1,
  NLM_F_DUMP = 0x300,
  NLM_F_REPLACE = 0x100,
  NLM_F_EXCL = 0x200,
  NLM_F_CREATE = 0x400;
/** nlmsghdr types, alignment and ack flags (linux/netlink.h). */
export const NLMSG_ERROR = 2, NLMSG_DONE = 3, NLMSG_ALIGNTO = 4, NLM_F_CAPPED = 0x100, NLM_F_ACK_TLVS = 0x200;
/** Netlink socket options and the extended-ack message attribute (linux/netlink.h). */
export const SOL_NETLINK = 270, NETLINK_CAP_ACK = 10, NETLINK_EXT_ACK = 11, NLMSGERR_ATTR_MSG = 1;
/** Strict dump checking (linux/netlink.h) and the errno a kernel refusing it answers. */
export const NETLINK_GET_STRICT_CHK = 12, EINVAL = 22;
/** int 1 and 0 as setsockopt values. */
export const ONE = new Uint8Array(new Int32Array([1]).buffer), ZERO = new Uint8Array(4);
/** Route attributes (linux/rtnetlink.h). */
export const RTA_DST = 1,
  RTA_OIF = 4,
  RTA_GATEWAY = 5,
  RTA_PRIORITY = 6,
  RTA_PREFSRC = 7,
  RTA_MULTIPATH = 9,
  RTA_TABLE = 15;
/** Neighbour attributes (linux/neighbour.h). */
export const NDA_DST = 1, NDA_LLADDR = 2, NDA_IFINDEX = 8;
/** The errno of an RTM_NEWLINK change the kernel wants as RTM_SETLINK. */
export const EOPNOTSUPP = 95;
/** rtnetlink message types (linux/rtnetlink.h). */
export const RTM_NEWLINK = 16,
  RTM_SETLINK = 19,
  RTM_NEWROUTE = 24,
  RTM_GETROUTE = 26,
  RTM_NEWNEIGH = 28,
  RTM_GETNEIGH = 30;
/** Namespace-id message types (linux/rtnetlink.h). */
export const RTM_NEWNSID = 88, RTM_GETNSID = 90;
/** Bridge-port attributes (linux/if_link.h) and the nested-attribute flag. */
export const IFLA_PROTINFO = 12, IFLA_BRPORT_MODE = 4, NLA_F_NESTED = 0x8000;
/** Namespace-id attributes (linux/net_namespace.h). */
export const NETNSA_NSID = 1, NETNSA_FD = 3;
/** Link flag "up" (linux/if.h). */
export const IFF_UP = 0x1;
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
/** Route tables and the "nowhere" scope (linux/rtnetlink.h). */
export const RT_TABLE_MAIN = 254, RT_TABLE_LOCAL = 255, RT_SCOPE_NOWHERE = 255;

/** 4 or 6 for AF_INET/AF_INET6, null for any other address family. */
export function fam(f: number): 4 | 6 | null {
  return f === AF_INET ? 4 : f === AF_INET6 ? 6 : null;
}
