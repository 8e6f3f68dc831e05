/**
 * The packet-path evaluator: a packet walked through the node's netfilter hooks as the kernel does —
 * iptables-legacy, iptables-nft and every native nft base chain on each hook, by priority, into jumped-to
 * chains — to the first verdict that drops it (with the rule, table, chain and back-end), or "unknown
 * match: <text>" when it cannot tell. Read by doctor's firewall checks, `--probe` and `flanctl trace`.
 * @module
 */
export type { Backend, Hook, Packet, PathVerdict, Rule, RuleRef, Step, StepVerdict, Table } from "./types.ts";
export { parseIptSave } from "./ipt_parse.ts";
export { parseNftJson } from "./nft_parse.ts";
export { walkPath } from "./walk.ts";
export { dumpsOf, type FirewallDumps, readRuleset, type Ruleset } from "./ruleset.ts";
export {
  atHook,
  evaluate,
  FORWARD_HOOKS,
  INPUT_HOOKS,
  OUTSIDE,
  overlayDevice,
  overlayIn,
  overlayIn6,
  type PathCheck,
  placeText,
  podForward,
  podForward6,
  podIn,
  podOutside,
  ruleset4,
  ruleset6,
  stepText,
  verdictText,
} from "./paths.ts";
