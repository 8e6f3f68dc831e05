/**
 * flannel's masquerade and forward rules (iptables mode), as `iptables-save` prints them. flannel's own
 * end-to-end tests compare these lines verbatim, so they are generated here in exactly that form.
 * @module
 */
import type { IPNet } from "../base/cidr.ts";

/** The nat chain flannel masquerades in. */
export const MASQ_CHAIN = "FLANNEL-POSTRTG";
/** The filter chain flannel accepts forwarded pod traffic in. */
export const FWD_CHAIN = "FLANNEL-FWD";

/** Rules of one table: the jump into our chain and the chain's own rules, in iptables-save form. */
export interface TableRules {
  /** IP family of the rules (the network's): 4 renders for iptables, 6 for ip6tables. */
  family?: 4 | 6;
  table: "nat" | "filter";
  chain: string;
  /** The built-in chain that jumps to `chain`. */
  parent: "POSTROUTING" | "FORWARD";
  jump: string;
  rules: string[];
}

/** Options of the masquerade rules. */
export interface MasqOptions {
  /** `--random-fully` on the MASQUERADE rules (default true, flanneld's; off for
   * --ip-masq-fully-random-disable or an iptables without it). */
  randomFully?: boolean;
}

/** The nat rules for `network` (the cluster Network) and `subnet` (our node's subnet). */
export function masqRules(network: IPNet, subnet: IPNet, opts: MasqOptions = {}): TableRules {
  const c = `-m comment --comment "flanneld masq"`;
  const n = network.toString();
  const s = subnet.toString();
  const mcast = network.family === 4 ? "224.0.0.0/4" : "ff00::/8";
  const masq = opts.randomFully === false ? "MASQUERADE" : "MASQUERADE --random-fully";
  return {
    family: network.family,
    table: "nat",
    chain: MASQ_CHAIN,
    parent: "POSTROUTING",
    jump: `-A POSTROUTING ${c} -j ${MASQ_CHAIN}`,
    rules: [
      `-A ${MASQ_CHAIN} -m mark --mark 0x4000/0x4000 ${c} -j RETURN`,
      `-A ${MASQ_CHAIN} -s ${s} -d ${n} ${c} -j RETURN`,
      `-A ${MASQ_CHAIN} -s ${n} -d ${s} ${c} -j RETURN`,
      `-A ${MASQ_CHAIN} ! -s ${n} -d ${s} ${c} -j RETURN`,
      `-A ${MASQ_CHAIN} -s ${n} ! -d ${mcast} ${c} -j ${masq}`,
      `-A ${MASQ_CHAIN} ! -s ${n} -d ${n} ${c} -j ${masq}`,
    ],
  };
}

/** The filter rules accepting forwarded traffic from and to `network`. */
export function forwardRules(network: IPNet): TableRules {
  const c = `-m comment --comment "flanneld forward"`;
  const n = network.toString();
  return {
    family: network.family,
    table: "filter",
    chain: FWD_CHAIN,
    parent: "FORWARD",
    jump: `-A FORWARD ${c} -j ${FWD_CHAIN}`,
    rules: [
      `-A ${FWD_CHAIN} -s ${n} ${c} -j ACCEPT`,
      `-A ${FWD_CHAIN} -d ${n} ${c} -j ACCEPT`,
    ],
  };
}
