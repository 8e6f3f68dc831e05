/**
 * The network namespace calls of lib/os alone (switch into one, its file, its label), for callers that pay
 * for every module they load: a CNI call is a fresh process, and lib/os/mod.ts would bring exec, malloc,
 * libnftables, TUN and unix datagrams with it (lib/cni/bridge.ts). Everyone else uses lib/os/mod.ts, which
 * exports the same functions.
 * @module
 */
export { inNetns, netnsLabel, netnsPath } from "../sys/netns.ts";
export type { NetnsRef } from "../sys/netns.ts";
