/**
 * Address ranges for nft interval sets: ipBlocks (a CIDR without its excepts) and single pod addresses,
 * merged into sorted, disjoint ranges, so a set's elements never overlap (nft refuses
 * overlapping elements in an interval set) and one set answers "any peer of this rule".
 * @module
 */
import { IPAddr, type IPFamily, type IPNet } from "../base/cidr.ts";

/** An inclusive range of addresses of one family. */
export type Range = readonly [bigint, bigint];

/** `cidr` without the `except` prefixes (which lie inside it), as sorted disjoint ranges. */
export function subtract(cidr: IPNet, except: readonly IPNet[]): Range[] {
  let out: Range[] = [[cidr.ip.value, cidr.last.value]];
  for (const e of except) {
    const lo = e.ip.value, hi = e.last.value;
    const next: Range[] = [];
    for (const [a, b] of out) {
      if (hi < a || lo > b) {
        next.push([a, b]);
        continue;
      }
      if (a < lo) next.push([a, lo - 1n]);
      if (hi < b) next.push([hi + 1n, b]);
    }
    out = next;
  }
  return out;
}

/**
 * Sorts and merges overlapping ranges (adjacent ones stay apart, so a pod address joining or leaving a set
 * is one element added or deleted).
 */
export function merge(rs: readonly Range[]): Range[] {
  const s = [...rs].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  const out: [bigint, bigint][] = [];
  for (const [a, b] of s) {
    const last = out[out.length - 1];
    if (last && a <= last[1]) {
      if (b > last[1]) last[1] = b;
    } else out.push([a, b]);
  }
  return out;
}

/** A range as an nft set element: `a` or `a-b`. */
export function rangeText(family: IPFamily, [a, b]: Range): string {
  const x = new IPAddr(family, a).toString();
  return a === b ? x : `${x}-${new IPAddr(family, b).toString()}`;
}
