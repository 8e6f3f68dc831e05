/**
 * FFI bindings: libnl-3, libnl-route-3 and the libc calls of the whole product, loaded with `Deno.dlopen`
 * on first use (so `flanctl --help` works on a machine without libnl). One symbol table per library, each
 * symbol with its C prototype, in the style of denodrivers/sqlite3; each symbol is bound on its first call,
 * so a caller pays only for the group it uses (the CNI path never binds the UDP data path's or sd_notify's
 * calls). libnftables has its own loader (nftables.ts: it is optional). `tools/check_boundaries.ts` (in
 * `deno task gate`) fails when `Deno.dlopen` or a `Deno.Unsafe*` API appears outside lib/sys, lib/netlink
 * and the udp workers.
 *
 * Hand-written rather than a package: no npm package binds libnl for Deno, and the table is the whole
 * binding. Nothing here leaves lib/sys and lib/netlink: pointers stay inside them.
 * @module
 */

import { errText, FlanctlError } from "../base/errors.ts";
import { isShortLived } from "../base/process_kind.ts";

/** libnl-3.so.200: sockets, messages, attributes, addresses, caches. */
const NL_SYMBOLS = {
  // struct nl_sock *nl_socket_alloc(void);
  nl_socket_alloc: { parameters: [], result: "pointer" },
  // void nl_socket_free(struct nl_sock *sk);
  nl_socket_free: { parameters: ["pointer"], result: "void" },
  // int nl_connect(struct nl_sock *sk, int protocol);
  nl_connect: { parameters: ["pointer", "i32"], result: "i32" },
  // int nl_socket_set_buffer_size(struct nl_sock *sk, int rxbuf, int txbuf);
  nl_socket_set_buffer_size: { parameters: ["pointer", "i32", "i32"], result: "i32" },
  // const char *nl_geterror(int error);
  nl_geterror: { parameters: ["i32"], result: "pointer" },
  // int nl_cache_alloc_name(const char *kind, struct nl_cache **result);
  nl_cache_alloc_name: { parameters: ["buffer", "buffer"], result: "i32" },
  // void nl_cache_set_arg1(struct nl_cache *cache, int arg);
  nl_cache_set_arg1: { parameters: ["pointer", "i32"], result: "void" },
  // int nl_cache_refill(struct nl_sock *sk, struct nl_cache *cache);
  nl_cache_refill: { parameters: ["pointer", "pointer"], result: "i32" },
  // void nl_cache_free(struct nl_cache *cache);
  nl_cache_free: { parameters: ["pointer"], result: "void" },
  // struct nl_object *nl_cache_get_first(struct nl_cache *cache);
  nl_cache_get_first: { parameters: ["pointer"], result: "pointer" },
  // struct nl_object *nl_cache_get_next(struct nl_object *obj);
  nl_cache_get_next: { parameters: ["pointer"], result: "pointer" },
  // struct nl_addr *nl_addr_build(int family, const void *buf, size_t size);
  nl_addr_build: { parameters: ["i32", "buffer", "usize"], result: "pointer" },
  // void nl_addr_put(struct nl_addr *addr);
  nl_addr_put: { parameters: ["pointer"], result: "void" },
  // void nl_addr_set_prefixlen(struct nl_addr *addr, int prefixlen);
  nl_addr_set_prefixlen: { parameters: ["pointer", "i32"], result: "void" },
  // unsigned int nl_addr_get_prefixlen(const struct nl_addr *addr);
  nl_addr_get_prefixlen: { parameters: ["pointer"], result: "u32" },
  // unsigned int nl_addr_get_len(const struct nl_addr *addr);
  nl_addr_get_len: { parameters: ["pointer"], result: "u32" },
  // void *nl_addr_get_binary_addr(const struct nl_addr *addr);
  nl_addr_get_binary_addr: { parameters: ["pointer"], result: "pointer" },
  // struct nl_msg *nlmsg_alloc_simple(int nlmsgtype, int flags);
  nlmsg_alloc_simple: { parameters: ["i32", "i32"], result: "pointer" },
  // struct nlmsghdr *nlmsg_hdr(struct nl_msg *n);
  nlmsg_hdr: { parameters: ["pointer"], result: "pointer" },
  // int nl_socket_set_fd(struct nl_sock *sk, int protocol, int fd);
  nl_socket_set_fd: { parameters: ["pointer", "i32", "i32"], result: "i32" },
  // int nl_socket_get_fd(const struct nl_sock *sk);
  nl_socket_get_fd: { parameters: ["pointer"], result: "i32" },
  // void nlmsg_free(struct nl_msg *msg);
  nlmsg_free: { parameters: ["pointer"], result: "void" },
  // int nlmsg_append(struct nl_msg *n, void *data, size_t len, int pad);
  nlmsg_append: { parameters: ["pointer", "buffer", "usize", "i32"], result: "i32" },
  // int nla_put(struct nl_msg *msg, int attrtype, int datalen, const void *data);
  nla_put: { parameters: ["pointer", "i32", "i32", "buffer"], result: "i32" },
  // struct nlattr *nla_nest_start(struct nl_msg *msg, int attrtype);
  nla_nest_start: { parameters: ["pointer", "i32"], result: "pointer" },
  // int nla_nest_end(struct nl_msg *msg, struct nlattr *start);
  nla_nest_end: { parameters: ["pointer", "pointer"], result: "i32" },
  // int nl_send_auto(struct nl_sock *sk, struct nl_msg *msg);
  nl_send_auto: { parameters: ["pointer", "pointer"], result: "i32" },
  // int nl_sendto(struct nl_sock *sk, void *buf, size_t size);
  nl_sendto: { parameters: ["pointer", "buffer", "usize"], result: "i32" },
  // int nl_send_simple(struct nl_sock *sk, int type, int flags, void *buf, size_t size);
  nl_send_simple: { parameters: ["pointer", "i32", "i32", "buffer", "usize"], result: "i32" },
  // void nl_socket_disable_seq_check(struct nl_sock *sk);
  nl_socket_disable_seq_check: { parameters: ["pointer"], result: "void" },
  // void nl_socket_disable_auto_ack(struct nl_sock *sk);
  nl_socket_disable_auto_ack: { parameters: ["pointer"], result: "void" },
  // void nl_socket_enable_auto_ack(struct nl_sock *sk);
  nl_socket_enable_auto_ack: { parameters: ["pointer"], result: "void" },
  // int nl_wait_for_ack(struct nl_sock *sk);
  nl_wait_for_ack: { parameters: ["pointer"], result: "i32" },
  // int nl_recv(struct nl_sock *sk, struct sockaddr_nl *nla, unsigned char **buf, struct ucred **creds);
  nl_recv: { parameters: ["pointer", "buffer", "buffer", "pointer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** libnl-route-3.so.200: rtnetlink objects (link, addr, route, neigh). */
const ROUTE_SYMBOLS = {
  // ---- links ----
  // int rtnl_link_alloc_cache(struct nl_sock *sk, int family, struct nl_cache **result);
  rtnl_link_alloc_cache: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
  // int rtnl_link_get_kernel(struct nl_sock *sk, int ifindex, const char *name, struct rtnl_link **result);
  rtnl_link_get_kernel: { parameters: ["pointer", "i32", "buffer", "buffer"], result: "i32" },
  // struct rtnl_link *rtnl_link_alloc(void);
  rtnl_link_alloc: { parameters: [], result: "pointer" },
  // void rtnl_link_put(struct rtnl_link *link);
  rtnl_link_put: { parameters: ["pointer"], result: "void" },
  // int rtnl_link_add(struct nl_sock *sk, struct rtnl_link *link, int flags);
  rtnl_link_add: { parameters: ["pointer", "pointer", "i32"], result: "i32" },
  // int rtnl_link_change(struct nl_sock *sk, struct rtnl_link *orig, struct rtnl_link *changes, int flags);
  rtnl_link_change: { parameters: ["pointer", "pointer", "pointer", "i32"], result: "i32" },
  // int rtnl_link_delete(struct nl_sock *sk, const struct rtnl_link *link);
  rtnl_link_delete: { parameters: ["pointer", "pointer"], result: "i32" },
  // int rtnl_link_build_add_request(struct rtnl_link *link, int flags, struct nl_msg **result);
  rtnl_link_build_add_request: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
  // int rtnl_link_build_change_request(struct rtnl_link *orig, struct rtnl_link *changes, int flags,
  //                                    struct nl_msg **result);
  rtnl_link_build_change_request: { parameters: ["pointer", "pointer", "i32", "buffer"], result: "i32" },
  // int rtnl_link_build_delete_request(const struct rtnl_link *link, struct nl_msg **result);
  rtnl_link_build_delete_request: { parameters: ["pointer", "buffer"], result: "i32" },
  // int rtnl_link_get_ifindex(struct rtnl_link *link);
  rtnl_link_get_ifindex: { parameters: ["pointer"], result: "i32" },
  // void rtnl_link_set_ifindex(struct rtnl_link *link, int ifindex);
  rtnl_link_set_ifindex: { parameters: ["pointer", "i32"], result: "void" },
  // char *rtnl_link_get_name(struct rtnl_link *link);
  rtnl_link_get_name: { parameters: ["pointer"], result: "pointer" },
  // void rtnl_link_set_name(struct rtnl_link *link, const char *name);
  rtnl_link_set_name: { parameters: ["pointer", "buffer"], result: "void" },
  // char *rtnl_link_get_type(struct rtnl_link *link);
  rtnl_link_get_type: { parameters: ["pointer"], result: "pointer" },
  // int rtnl_link_set_type(struct rtnl_link *link, const char *type);
  rtnl_link_set_type: { parameters: ["pointer", "buffer"], result: "i32" },
  // unsigned int rtnl_link_get_flags(struct rtnl_link *link);
  rtnl_link_get_flags: { parameters: ["pointer"], result: "u32" },
  // void rtnl_link_set_flags(struct rtnl_link *link, unsigned int flags);
  rtnl_link_set_flags: { parameters: ["pointer", "u32"], result: "void" },
  // void rtnl_link_unset_flags(struct rtnl_link *link, unsigned int flags);
  rtnl_link_unset_flags: { parameters: ["pointer", "u32"], result: "void" },
  // uint8_t rtnl_link_get_operstate(struct rtnl_link *link);
  rtnl_link_get_operstate: { parameters: ["pointer"], result: "u8" },
  // unsigned int rtnl_link_get_mtu(struct rtnl_link *link);
  rtnl_link_get_mtu: { parameters: ["pointer"], result: "u32" },
  // void rtnl_link_set_mtu(struct rtnl_link *link, unsigned int mtu);
  rtnl_link_set_mtu: { parameters: ["pointer", "u32"], result: "void" },
  // void rtnl_link_set_txqlen(struct rtnl_link *link, unsigned int txqlen);
  rtnl_link_set_txqlen: { parameters: ["pointer", "u32"], result: "void" },
  // struct nl_addr *rtnl_link_get_addr(struct rtnl_link *link);   (borrowed)
  rtnl_link_get_addr: { parameters: ["pointer"], result: "pointer" },
  // void rtnl_link_set_addr(struct rtnl_link *link, struct nl_addr *addr);   (takes its own reference)
  rtnl_link_set_addr: { parameters: ["pointer", "pointer"], result: "void" },
  // int rtnl_link_get_master(struct rtnl_link *link);
  rtnl_link_get_master: { parameters: ["pointer"], result: "i32" },
  // void rtnl_link_set_master(struct rtnl_link *link, int ifindex);
  rtnl_link_set_master: { parameters: ["pointer", "i32"], result: "void" },
  // int rtnl_link_get_link(struct rtnl_link *link);
  rtnl_link_get_link: { parameters: ["pointer"], result: "i32" },
  // int rtnl_link_get_link_netnsid(const struct rtnl_link *link, int32_t *out_link_netnsid);
  rtnl_link_get_link_netnsid: { parameters: ["pointer", "buffer"], result: "i32" },
  // void rtnl_link_set_ns_fd(struct rtnl_link *link, int fd);
  rtnl_link_set_ns_fd: { parameters: ["pointer", "i32"], result: "void" },
  // int rtnl_link_bridge_get_flags(struct rtnl_link *link);   (-NLE_OPNOTSUPP unless AF_BRIDGE)
  rtnl_link_bridge_get_flags: { parameters: ["pointer"], result: "i32" },
  // struct rtnl_link *rtnl_link_veth_alloc(void);
  rtnl_link_veth_alloc: { parameters: [], result: "pointer" },
  // struct rtnl_link *rtnl_link_veth_get_peer(struct rtnl_link *link);   (returns a new reference)
  rtnl_link_veth_get_peer: { parameters: ["pointer"], result: "pointer" },
  // struct rtnl_link *rtnl_link_vxlan_alloc(void);
  rtnl_link_vxlan_alloc: { parameters: [], result: "pointer" },
  // int rtnl_link_vxlan_set_id(struct rtnl_link *link, uint32_t id);
  rtnl_link_vxlan_set_id: { parameters: ["pointer", "u32"], result: "i32" },
  // int rtnl_link_vxlan_get_id(struct rtnl_link *link, uint32_t *id);
  rtnl_link_vxlan_get_id: { parameters: ["pointer", "buffer"], result: "i32" },
  // int rtnl_link_vxlan_set_port(struct rtnl_link *link, uint32_t port);
  rtnl_link_vxlan_set_port: { parameters: ["pointer", "u32"], result: "i32" },
  // int rtnl_link_vxlan_get_port(struct rtnl_link *link, uint32_t *port);
  rtnl_link_vxlan_get_port: { parameters: ["pointer", "buffer"], result: "i32" },
  // int rtnl_link_vxlan_set_local(struct rtnl_link *link, struct nl_addr *addr);   (copies the bytes)
  rtnl_link_vxlan_set_local: { parameters: ["pointer", "pointer"], result: "i32" },
  // int rtnl_link_vxlan_get_local(struct rtnl_link *link, struct nl_addr **addr);  (new reference)
  rtnl_link_vxlan_get_local: { parameters: ["pointer", "buffer"], result: "i32" },
  // int rtnl_link_vxlan_set_link(struct rtnl_link *link, uint32_t index);
  rtnl_link_vxlan_set_link: { parameters: ["pointer", "u32"], result: "i32" },
  // int rtnl_link_vxlan_get_link(struct rtnl_link *link, uint32_t *index);
  rtnl_link_vxlan_get_link: { parameters: ["pointer", "buffer"], result: "i32" },
  // int rtnl_link_vxlan_set_learning(struct rtnl_link *link, uint8_t learning);
  rtnl_link_vxlan_set_learning: { parameters: ["pointer", "u8"], result: "i32" },
  // int rtnl_link_vxlan_get_learning(struct rtnl_link *link);
  rtnl_link_vxlan_get_learning: { parameters: ["pointer"], result: "i32" },
  // int rtnl_link_vxlan_set_flags(struct rtnl_link *link, uint32_t flags, int enable);
  rtnl_link_vxlan_set_flags: { parameters: ["pointer", "u32", "i32"], result: "i32" },
  // int rtnl_link_vxlan_get_flags(struct rtnl_link *link, uint32_t *out_flags);
  rtnl_link_vxlan_get_flags: { parameters: ["pointer", "buffer"], result: "i32" },

  // ---- addresses ----
  // int rtnl_addr_alloc_cache(struct nl_sock *sk, struct nl_cache **result);
  rtnl_addr_alloc_cache: { parameters: ["pointer", "buffer"], result: "i32" },
  // struct rtnl_addr *rtnl_addr_alloc(void);
  rtnl_addr_alloc: { parameters: [], result: "pointer" },
  // void rtnl_addr_put(struct rtnl_addr *addr);
  rtnl_addr_put: { parameters: ["pointer"], result: "void" },
  // int rtnl_addr_add(struct nl_sock *sk, struct rtnl_addr *addr, int flags);
  rtnl_addr_add: { parameters: ["pointer", "pointer", "i32"], result: "i32" },
  // int rtnl_addr_delete(struct nl_sock *sk, struct rtnl_addr *addr, int flags);
  rtnl_addr_delete: { parameters: ["pointer", "pointer", "i32"], result: "i32" },
  // int rtnl_addr_build_add_request(struct rtnl_addr *addr, int flags, struct nl_msg **result);
  rtnl_addr_build_add_request: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
  // int rtnl_addr_build_delete_request(struct rtnl_addr *addr, int flags, struct nl_msg **result);
  rtnl_addr_build_delete_request: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
  // int rtnl_addr_get_ifindex(struct rtnl_addr *addr);
  rtnl_addr_get_ifindex: { parameters: ["pointer"], result: "i32" },
  // void rtnl_addr_set_ifindex(struct rtnl_addr *addr, int ifindex);
  rtnl_addr_set_ifindex: { parameters: ["pointer", "i32"], result: "void" },
  // int rtnl_addr_get_family(struct rtnl_addr *addr);
  rtnl_addr_get_family: { parameters: ["pointer"], result: "i32" },
  // struct nl_addr *rtnl_addr_get_local(struct rtnl_addr *addr);   (borrowed)
  rtnl_addr_get_local: { parameters: ["pointer"], result: "pointer" },
  // int rtnl_addr_set_local(struct rtnl_addr *addr, struct nl_addr *local);   (takes its own reference)
  rtnl_addr_set_local: { parameters: ["pointer", "pointer"], result: "i32" },
  // int rtnl_addr_get_prefixlen(struct rtnl_addr *addr);
  rtnl_addr_get_prefixlen: { parameters: ["pointer"], result: "i32" },
  // void rtnl_addr_set_prefixlen(struct rtnl_addr *addr, int prefixlen);
  rtnl_addr_set_prefixlen: { parameters: ["pointer", "i32"], result: "void" },
  // int rtnl_addr_get_scope(struct rtnl_addr *addr);
  rtnl_addr_get_scope: { parameters: ["pointer"], result: "i32" },
  // void rtnl_addr_set_scope(struct rtnl_addr *addr, int scope);
  rtnl_addr_set_scope: { parameters: ["pointer", "i32"], result: "void" },
  // void rtnl_addr_set_flags(struct rtnl_addr *addr, unsigned int flags);
  rtnl_addr_set_flags: { parameters: ["pointer", "u32"], result: "void" },
  // int rtnl_addr_set_broadcast(struct rtnl_addr *addr, struct nl_addr *bcast);   (takes its own reference)
  rtnl_addr_set_broadcast: { parameters: ["pointer", "pointer"], result: "i32" },

  // ---- routes ----
  // int rtnl_route_alloc_cache(struct nl_sock *sk, int family, int flags, struct nl_cache **result);
  rtnl_route_alloc_cache: { parameters: ["pointer", "i32", "i32", "buffer"], result: "i32" },
  // struct rtnl_route *rtnl_route_alloc(void);
  rtnl_route_alloc: { parameters: [], result: "pointer" },
  // void rtnl_route_put(struct rtnl_route *route);
  rtnl_route_put: { parameters: ["pointer"], result: "void" },
  // int rtnl_route_add(struct nl_sock *sk, struct rtnl_route *route, int flags);
  rtnl_route_add: { parameters: ["pointer", "pointer", "i32"], result: "i32" },
  // int rtnl_route_delete(struct nl_sock *sk, struct rtnl_route *route, int flags);
  rtnl_route_delete: { parameters: ["pointer", "pointer", "i32"], result: "i32" },
  // int rtnl_route_build_add_request(struct rtnl_route *tmpl, int flags, struct nl_msg **result);
  rtnl_route_build_add_request: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
  // int rtnl_route_build_del_request(struct rtnl_route *tmpl, int flags, struct nl_msg **result);
  rtnl_route_build_del_request: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
  // uint8_t rtnl_route_get_family(struct rtnl_route *route);
  rtnl_route_get_family: { parameters: ["pointer"], result: "u8" },
  // int rtnl_route_set_family(struct rtnl_route *route, uint8_t family);
  rtnl_route_set_family: { parameters: ["pointer", "u8"], result: "i32" },
  // struct nl_addr *rtnl_route_get_dst(struct rtnl_route *route);   (borrowed)
  rtnl_route_get_dst: { parameters: ["pointer"], result: "pointer" },
  // int rtnl_route_set_dst(struct rtnl_route *route, struct nl_addr *addr);   (takes its own reference)
  rtnl_route_set_dst: { parameters: ["pointer", "pointer"], result: "i32" },
  // uint32_t rtnl_route_get_table(struct rtnl_route *route);
  rtnl_route_get_table: { parameters: ["pointer"], result: "u32" },
  // void rtnl_route_set_table(struct rtnl_route *route, uint32_t table);
  rtnl_route_set_table: { parameters: ["pointer", "u32"], result: "void" },
  // uint8_t rtnl_route_get_scope(struct rtnl_route *route);
  rtnl_route_get_scope: { parameters: ["pointer"], result: "u8" },
  // void rtnl_route_set_scope(struct rtnl_route *route, uint8_t scope);
  rtnl_route_set_scope: { parameters: ["pointer", "u8"], result: "void" },
  // uint8_t rtnl_route_get_protocol(struct rtnl_route *route);
  rtnl_route_get_protocol: { parameters: ["pointer"], result: "u8" },
  // void rtnl_route_set_protocol(struct rtnl_route *route, uint8_t protocol);
  rtnl_route_set_protocol: { parameters: ["pointer", "u8"], result: "void" },
  // uint8_t rtnl_route_get_type(struct rtnl_route *route);
  rtnl_route_get_type: { parameters: ["pointer"], result: "u8" },
  // int rtnl_route_set_type(struct rtnl_route *route, uint8_t type);
  rtnl_route_set_type: { parameters: ["pointer", "u8"], result: "i32" },
  // struct nl_addr *rtnl_route_get_pref_src(struct rtnl_route *route);   (borrowed)
  rtnl_route_get_pref_src: { parameters: ["pointer"], result: "pointer" },
  // int rtnl_route_set_pref_src(struct rtnl_route *route, struct nl_addr *addr);
  rtnl_route_set_pref_src: { parameters: ["pointer", "pointer"], result: "i32" },
  // uint32_t rtnl_route_get_priority(struct rtnl_route *route);
  rtnl_route_get_priority: { parameters: ["pointer"], result: "u32" },
  // void rtnl_route_set_priority(struct rtnl_route *route, uint32_t prio);
  rtnl_route_set_priority: { parameters: ["pointer", "u32"], result: "void" },
  // int rtnl_route_get_nnexthops(struct rtnl_route *route);
  rtnl_route_get_nnexthops: { parameters: ["pointer"], result: "i32" },
  // struct rtnl_nexthop *rtnl_route_nexthop_n(struct rtnl_route *r, int n);   (borrowed)
  rtnl_route_nexthop_n: { parameters: ["pointer", "i32"], result: "pointer" },
  // void rtnl_route_add_nexthop(struct rtnl_route *route, struct rtnl_nexthop *nh);   (route owns nh)
  rtnl_route_add_nexthop: { parameters: ["pointer", "pointer"], result: "void" },
  // struct rtnl_nexthop *rtnl_route_nh_alloc(void);
  rtnl_route_nh_alloc: { parameters: [], result: "pointer" },
  // void rtnl_route_nh_free(struct rtnl_nexthop *nh);
  rtnl_route_nh_free: { parameters: ["pointer"], result: "void" },
  // int rtnl_route_nh_get_ifindex(struct rtnl_nexthop *nh);
  rtnl_route_nh_get_ifindex: { parameters: ["pointer"], result: "i32" },
  // void rtnl_route_nh_set_ifindex(struct rtnl_nexthop *nh, int ifindex);
  rtnl_route_nh_set_ifindex: { parameters: ["pointer", "i32"], result: "void" },
  // struct nl_addr *rtnl_route_nh_get_gateway(struct rtnl_nexthop *nh);   (borrowed)
  rtnl_route_nh_get_gateway: { parameters: ["pointer"], result: "pointer" },
  // void rtnl_route_nh_set_gateway(struct rtnl_nexthop *nh, struct nl_addr *addr);   (own reference)
  rtnl_route_nh_set_gateway: { parameters: ["pointer", "pointer"], result: "void" },
  // unsigned int rtnl_route_nh_get_flags(struct rtnl_nexthop *nh);
  rtnl_route_nh_get_flags: { parameters: ["pointer"], result: "u32" },
  // void rtnl_route_nh_set_flags(struct rtnl_nexthop *nh, unsigned int flags);
  rtnl_route_nh_set_flags: { parameters: ["pointer", "u32"], result: "void" },

  // int rtnl_route_parse(struct nlmsghdr *nlh, struct rtnl_route **result);
  rtnl_route_parse: { parameters: ["pointer", "buffer"], result: "i32" },

  // ---- neighbours ----
  // int rtnl_neigh_parse(struct nlmsghdr *n, struct rtnl_neigh **result);
  rtnl_neigh_parse: { parameters: ["pointer", "buffer"], result: "i32" },
  // int rtnl_neigh_alloc_cache(struct nl_sock *sk, struct nl_cache **result);
  rtnl_neigh_alloc_cache: { parameters: ["pointer", "buffer"], result: "i32" },
  // struct rtnl_neigh *rtnl_neigh_alloc(void);
  rtnl_neigh_alloc: { parameters: [], result: "pointer" },
  // void rtnl_neigh_put(struct rtnl_neigh *neigh);
  rtnl_neigh_put: { parameters: ["pointer"], result: "void" },
  // int rtnl_neigh_add(struct nl_sock *sk, struct rtnl_neigh *tmpl, int flags);
  rtnl_neigh_add: { parameters: ["pointer", "pointer", "i32"], result: "i32" },
  // int rtnl_neigh_delete(struct nl_sock *sk, struct rtnl_neigh *neigh, int flags);
  rtnl_neigh_delete: { parameters: ["pointer", "pointer", "i32"], result: "i32" },
  // int rtnl_neigh_build_add_request(struct rtnl_neigh *tmpl, int flags, struct nl_msg **result);
  rtnl_neigh_build_add_request: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
  // int rtnl_neigh_build_delete_request(struct rtnl_neigh *neigh, int flags, struct nl_msg **result);
  rtnl_neigh_build_delete_request: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
  // int rtnl_neigh_get_family(struct rtnl_neigh *neigh);
  rtnl_neigh_get_family: { parameters: ["pointer"], result: "i32" },
  // void rtnl_neigh_set_family(struct rtnl_neigh *neigh, int family);
  rtnl_neigh_set_family: { parameters: ["pointer", "i32"], result: "void" },
  // int rtnl_neigh_get_ifindex(struct rtnl_neigh *neigh);
  rtnl_neigh_get_ifindex: { parameters: ["pointer"], result: "i32" },
  // void rtnl_neigh_set_ifindex(struct rtnl_neigh *neigh, int ifindex);
  rtnl_neigh_set_ifindex: { parameters: ["pointer", "i32"], result: "void" },
  // struct nl_addr *rtnl_neigh_get_dst(struct rtnl_neigh *neigh);   (borrowed)
  rtnl_neigh_get_dst: { parameters: ["pointer"], result: "pointer" },
  // int rtnl_neigh_set_dst(struct rtnl_neigh *neigh, struct nl_addr *addr);   (own reference)
  rtnl_neigh_set_dst: { parameters: ["pointer", "pointer"], result: "i32" },
  // struct nl_addr *rtnl_neigh_get_lladdr(struct rtnl_neigh *neigh);   (borrowed)
  rtnl_neigh_get_lladdr: { parameters: ["pointer"], result: "pointer" },
  // void rtnl_neigh_set_lladdr(struct rtnl_neigh *neigh, struct nl_addr *addr);   (own reference)
  rtnl_neigh_set_lladdr: { parameters: ["pointer", "pointer"], result: "void" },
  // int rtnl_neigh_get_state(struct rtnl_neigh *neigh);
  rtnl_neigh_get_state: { parameters: ["pointer"], result: "i32" },
  // void rtnl_neigh_set_state(struct rtnl_neigh *neigh, int state);
  rtnl_neigh_set_state: { parameters: ["pointer", "i32"], result: "void" },
  // unsigned int rtnl_neigh_get_flags(struct rtnl_neigh *neigh);
  rtnl_neigh_get_flags: { parameters: ["pointer"], result: "u32" },
  // void rtnl_neigh_set_flags(struct rtnl_neigh *neigh, unsigned int flags);
  rtnl_neigh_set_flags: { parameters: ["pointer", "u32"], result: "void" },
  // int rtnl_neigh_get_vlan(struct rtnl_neigh *neigh);   (-1 when unset)
  rtnl_neigh_get_vlan: { parameters: ["pointer"], result: "i32" },
  // int rtnl_neigh_get_master(struct rtnl_neigh *neigh);
  rtnl_neigh_get_master: { parameters: ["pointer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/**
 * libc.so.6, every libc call of the product, in groups by user: namespace switching and raw file
 * descriptors (netns.ts), the ethtool and TUN ioctls, the UDP data path, ctnetlink (conntrack.ts) and
 * sd_notify's unix datagram (unix_dgram.ts). size_t/ssize_t are declared u32/i32 (values < 2^31): a 32-bit
 * register write zero-extends on x86-64 and arm64, and numbers keep V8's fast call path (a BigInt per call
 * would not).
 */
const LIBC_SYMBOLS = {
  // ---- namespaces, file descriptors, errno, memory ----
  // int open(const char *pathname, int flags, ...);   (called without mode: no O_CREAT)
  open: { parameters: ["buffer", "i32"], result: "i32" },
  // int close(int fd);
  close: { parameters: ["i32"], result: "i32" },
  // int setns(int fd, int nstype);
  setns: { parameters: ["i32", "i32"], result: "i32" },
  // int setsockopt(int sockfd, int level, int optname, const void *optval, socklen_t optlen);
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  // int socket(int domain, int type, int protocol);   (ethtool.ts: an AF_INET socket for SIOCETHTOOL)
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  // int ioctl(int fd, unsigned long request, ...);   (called with one pointer argument: struct ifreq *)
  ioctl: { parameters: ["i32", "u64", "buffer"], result: "i32" },
  // int *__errno_location(void);
  __errno_location: { parameters: [], result: "pointer" },
  // void free(void *ptr);
  free: { parameters: ["pointer"], result: "void" },
  // int malloc_trim(size_t pad);   (glibc: gives free heap pages back to the kernel; malloc.ts)
  malloc_trim: { parameters: ["u32"], result: "i32" },
  // int madvise(void *addr, size_t length, int advice);   (malloc.ts: MADV_DONTNEED on the binary's pages)
  madvise: { parameters: ["pointer", "u32", "i32"], result: "i32" },
  // int execve(const char *path, char *const argv[], char *const envp[]);   (exec.ts)
  execve: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
  // ---- the UDP backend's data path (tun.ts, udp_socket.ts, udp_worker.ts) ----
  // Blocking calls made from dedicated workers, never from the event loop.
  // int ioctl(int fd, unsigned long request, unsigned long arg);   (TUNSETPERSIST: an integer argument)
  ioctl_int: { name: "ioctl", parameters: ["i32", "u64", "u64"], result: "i32" },
  // ssize_t read(int fd, void *buf, size_t count);
  read: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  // ssize_t write(int fd, const void *buf, size_t count);
  write: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  // int bind(int sockfd, const struct sockaddr *addr, socklen_t addrlen);
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  // int getsockname(int sockfd, struct sockaddr *addr, socklen_t *addrlen);
  getsockname: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  // int connect(int sockfd, const struct sockaddr *addr, socklen_t addrlen);   (udp_warmup.ts: an echo socket)
  connect: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  // ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to, socklen_t tolen);
  sendto: { parameters: ["i32", "buffer", "u32", "i32", "buffer", "u32"], result: "i32" },
  // ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from, socklen_t *fromlen);
  recvfrom: { parameters: ["i32", "buffer", "u32", "i32", "buffer", "buffer"], result: "i32" },
  // int sendmmsg(int fd, struct mmsghdr *msgvec, unsigned int vlen, int flags);
  sendmmsg: { parameters: ["i32", "buffer", "u32", "i32"], result: "i32" },
  // int recvmmsg(int fd, struct mmsghdr *msgvec, unsigned int vlen, int flags, struct timespec *timeout);
  recvmmsg: { parameters: ["i32", "buffer", "u32", "i32", "buffer"], result: "i32" },
  // int poll(struct pollfd *fds, nfds_t nfds, int timeout);
  poll: { parameters: ["buffer", "u32", "i32"], result: "i32" },
  // int eventfd(unsigned int initval, int flags);   (the TX worker wakes the RX worker's poll: udp_worker.ts)
  eventfd: { parameters: ["u32", "i32"], result: "i32" },
  // int sched_setaffinity(pid_t pid, size_t cpusetsize, const cpu_set_t *mask);   (pid 0: the calling thread)
  sched_setaffinity: { parameters: ["i32", "usize", "buffer"], result: "i32" },
  // pid_t gettid(void);   (glibc ≥ 2.30)
  gettid: { parameters: [], result: "i32" },
  // int setpriority(int which, id_t who, int prio);   (PRIO_PROCESS with a thread id: that thread's nice)
  setpriority: { parameters: ["i32", "u32", "i32"], result: "i32" },
  // ---- ctnetlink (conntrack.ts): socket, close and these ----
  // ssize_t send(int sockfd, const void *buf, size_t len, int flags);
  send: { parameters: ["i32", "buffer", "u32", "i32"], result: "i32" },
  // ssize_t recv(int sockfd, void *buf, size_t len, int flags);
  recv: { parameters: ["i32", "buffer", "u32", "i32"], result: "i32" },
  // ---- sd_notify (unix_dgram.ts): socket, sendto and close above ----
} as const satisfies Deno.ForeignLibraryInterface;

type NlLib = Deno.DynamicLibrary<typeof NL_SYMBOLS>["symbols"];
type RouteLib = Deno.DynamicLibrary<typeof ROUTE_SYMBOLS>["symbols"];
type LibcLib = Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"];

let nlLib: NlLib | null = null;
let routeLib: RouteLib | null = null;
let libcLib: LibcLib | null = null;

/**
 * The directory of shared libraries that `flanctl install-cni` lays down beside the Deno binary it installs
 * (`<cni bin dir>/.flanctl-runtime-<hash>/flanctl-lib/`, lib/install/cni.ts): a CNI call finds libnl (and
 * libnftables with its libraries) there, by absolute path, so the host needs none of them and no
 * LD_LIBRARY_PATH (which the plugin's children, iptables and conntrack, would inherit). Anywhere else (no
 * such directory beside the running Deno) the system's libraries are used, by soname.
 */
export const RUNTIME_LIB_DIR = "flanctl-lib";

/**
 * The libraries the CNI path may dlopen, each with the ones it needs first (their sonames, as the dynamic
 * linker matches an already loaded library by soname): what install-cni copies into {@link RUNTIME_LIB_DIR}.
 * libnftables is optional (portmap's nftables backend): install-cni copies its group only when all are there.
 */
export const CNI_LIBRARIES: readonly { soname: string; pkg: string; needs: readonly string[] }[] = [
  { soname: "libnl-3.so.200", pkg: "libnl-3-200", needs: [] },
  { soname: "libnl-route-3.so.200", pkg: "libnl-route-3-200", needs: ["libnl-3.so.200"] },
  {
    soname: "libnftables.so.1",
    pkg: "libnftables1",
    needs: ["libmnl.so.0", "libnftnl.so.11", "libxtables.so.12", "libjansson.so.4", "libgmp.so.10"],
  },
];

let bundledDir: string | null | undefined;
/** Libraries opened from the bundled directory, kept so they stay loaded. */
const preloaded = new Map<string, Deno.DynamicLibrary<Record<string, never>>>();

function isFile(p: string): boolean {
  try {
    return Deno.statSync(p).isFile;
  } catch {
    return false;
  }
}

/** {@link RUNTIME_LIB_DIR} beside the running Deno, or null (checked once). */
function runtimeLibDir(): string | null {
  if (bundledDir === undefined) {
    const exe = Deno.execPath();
    const dir = `${exe.slice(0, exe.lastIndexOf("/"))}/${RUNTIME_LIB_DIR}`;
    try {
      bundledDir = Deno.statSync(dir).isDirectory ? dir : null;
    } catch {
      bundledDir = null;
    }
  }
  return bundledDir;
}

/**
 * What to dlopen for `soname`: the copy in {@link RUNTIME_LIB_DIR} (its libraries of {@link CNI_LIBRARIES}
 * loaded from there first) when there is one, else the soname (the system's library).
 */
export function libraryPath(soname: string): string {
  const dir = runtimeLibDir();
  if (!dir || !isFile(`${dir}/${soname}`)) return soname;
  for (const dep of CNI_LIBRARIES.find((l) => l.soname === soname)?.needs ?? []) {
    if (!preloaded.has(dep) && isFile(`${dir}/${dep}`)) preloaded.set(dep, Deno.dlopen(`${dir}/${dep}`, {}));
  }
  return `${dir}/${soname}`;
}

/** Raised when a shared library cannot be loaded (package not installed, or no FFI permission). */
export class LibraryLoadError extends FlanctlError {
  constructor(soname: string, pkg: string, cause: unknown) {
    super(
      `cannot load ${soname} (${errText(cause)}); install the Debian package ${pkg}` +
        " (./install.sh does)",
      1,
      { cause },
    );
  }
}

/**
 * Binds symbol `name` of `soname` as it is declared in `syms`, except in a short-lived process
 * (lib/base/process_kind.ts: a CNI call) for a symbol returning an `int` or a pointer: there it is declared with
 * a struct result of that one member, which Deno never makes a V8 fast call of, so it generates no
 * fast-call trampoline when binding it, and a wrapper returns the number or pointer. A struct of one int32
 * or one pointer comes back in the same register as the int or pointer (x86-64 and arm64 calling
 * conventions), so the C call is the same. A CNI ADD or DEL binds 7 libc symbols (open, setns, close,
 * socket, setsockopt, send, recv), all returning int, plus `__errno_location` (a pointer, bound with every
 * libc table: {@link libc}); what this saves: docs/performance.md, "FFI binding in a CNI call".
 * The wrapper costs an array per call, nothing against a process that makes a few dozen calls; the
 * daemon's hot loops keep the fast calls.
 */
function bind<S extends Deno.ForeignLibraryInterface>(soname: string, syms: S, name: keyof S & string) {
  const def = syms[name] as Deno.ForeignFunction;
  const member = def.result === "i32" || def.result === "pointer" ? def.result : null;
  if (!isShortLived() || !member) {
    return Deno.dlopen(soname, { [name]: def } as Pick<S, typeof name>).symbols[name];
  }
  const sym = { [name]: { ...def, result: { struct: [member] } } } as const;
  const raw = Deno.dlopen(soname, sym).symbols[name] as unknown as (...a: unknown[]) => Uint8Array;
  // The member's bytes, little-endian (the product's targets, x86-64 and arm64 Linux, are).
  const wrapped = member === "i32"
    ? (...a: unknown[]) => {
      const r = raw(...a);
      return r[0] | r[1] << 8 | r[2] << 16 | r[3] << 24;
    }
    : (...a: unknown[]) => {
      const r = raw(...a);
      return Deno.UnsafePointer.create(new DataView(r.buffer, r.byteOffset, 8).getBigUint64(0, true));
    };
  return wrapped as unknown as Deno.DynamicLibrary<S>["symbols"][typeof name];
}

/**
 * Opens `soname` and returns its symbol table with each symbol bound on first use ({@link bind}), those of
 * `eager` at once. Deno generates a call stub per symbol when binding it, and a CNI call needs a fraction of
 * the ~150 symbols (the cost of binding them all up front: docs/performance.md, "FFI binding in a CNI call"). After
 * the first call a symbol is a plain data property, so hot loops pay nothing extra. dlopen() of an already
 * loaded library only bumps its reference count.
 */
function load<S extends Deno.ForeignLibraryInterface>(
  soname: string,
  pkg: string,
  syms: S,
  eager: readonly (keyof S & string)[] = [],
) {
  let path: string;
  try {
    path = libraryPath(soname);
    Deno.dlopen(path, {}); // fail here, with the package name, when the library is missing
  } catch (e) {
    throw new LibraryLoadError(soname, pkg, e);
  }
  const table = {} as Deno.DynamicLibrary<S>["symbols"];
  for (const name of Object.keys(syms) as (keyof S & string)[]) {
    Object.defineProperty(table, name, {
      configurable: true,
      enumerable: true,
      get() {
        const fn = bind(path, syms, name);
        Object.defineProperty(table, name, { value: fn, enumerable: true });
        return fn;
      },
    });
  }
  for (const name of eager) Object.defineProperty(table, name, { value: bind(path, syms, name) });
  return table;
}

/** libnl-3 symbols, loaded on first call. */
export function nl(): NlLib {
  return nlLib ??= load("libnl-3.so.200", "libnl-3-200", NL_SYMBOLS);
}

/** libnl-route-3 symbols, loaded on first call (loads libnl-3 first). */
export function rt(): RouteLib {
  if (!routeLib) {
    nl();
    routeLib = load("libnl-route-3.so.200", "libnl-route-3-200", ROUTE_SYMBOLS);
  }
  return routeLib;
}

/**
 * libc symbols, loaded on first call. `__errno_location` is bound with the table, before any other libc
 * symbol can be called: {@link errno} runs right after a failing call, and binding a symbol there (dlopen,
 * dlsym, a stub mapped) could change errno before it is read (once seen: EAGAIN read for an EBADF).
 */
export function libc(): LibcLib {
  return libcLib ??= load("libc.so.6", "libc6", LIBC_SYMBOLS, ["__errno_location"]);
}

const enc = new TextEncoder();

/** A NUL-terminated UTF-8 copy of `s` for `const char *` parameters. */
export function cstr(s: string): Uint8Array<ArrayBuffer> {
  const b = new Uint8Array(s.length * 3 + 1);
  const { written } = enc.encodeInto(s, b);
  return b.subarray(0, written + 1);
}

/** Reads a C string, or null for a NULL pointer. */
export function readCString(p: Deno.PointerValue): string | null {
  return p === null ? null : Deno.UnsafePointerView.getCString(p);
}

/** The current thread's errno. */
export function errno(): number {
  const p = libc().__errno_location();
  return p === null ? 0 : new Deno.UnsafePointerView(p).getInt32();
}

/** A one-slot out-parameter for `T **result` arguments. */
export class OutPtr {
  readonly buf: BigUint64Array<ArrayBuffer> = new BigUint64Array(1);
  /** The pointer the callee stored, or null. */
  get value(): Deno.PointerValue {
    return Deno.UnsafePointer.create(this.buf[0]);
  }
  /** Clears the slot before the next call. */
  reset(): this {
    this.buf[0] = 0n;
    return this;
  }
}
