/**
 * Generators of CNI input for the property tests of lib/cni: network configs as a runtime sends them on
 * stdin (names, versions, `ipam`, `runtimeConfig` with port mappings, IPs, a MAC and IP ranges, the flannel
 * plugin's `delegate`), mostly valid, with junk mixed in, field names in the spellings Go's decoder takes.
 * @module
 */
import fc from "fast-check";
import { anyText, ipv4Addr, ipv4Net, ipv6Addr, ipv6Net, longText } from "./prop.ts";
import { SUPPORTED_VERSIONS } from "../lib/cni/spec.ts";
import { IPNet } from "../lib/base/cidr.ts";
import type { SubnetEnv } from "../lib/node/subnet_env.ts";

/** A JSON value that is none of the expected ones. */
export const junk: fc.Arbitrary<unknown> = fc.oneof(fc.jsonValue({ maxDepth: 1 }), anyText);

/** `v` most of the time, junk otherwise. */
export function mostly<T>(v: fc.Arbitrary<T>, weight = 6): fc.Arbitrary<T | unknown> {
  return fc.oneof({ weight, arbitrary: v }, { weight: 1, arbitrary: junk });
}

/** Network names: valid (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`), or not. */
export const netName: fc.Arbitrary<unknown> = mostly(
  fc.stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9_.\-]{0,15}$/),
  8,
);

export const cniVersion: fc.Arbitrary<unknown> = fc.option(
  mostly(fc.constantFrom(...SUPPORTED_VERSIONS, "0.3.1", "1.0.0", "1.1.0", "2.0.0", "1.0"), 10),
  { freq: 8 },
);

const anyAddr = fc.oneof(ipv4Addr, ipv6Addr).map(String);

/** A range of a range set: a usable subnet, start ≤ end and a gateway inside it (mostly), or not. */
export const ipRange: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
  ipv4Net.filter((n) => n.prefix >= 8 && n.prefix <= 30),
  ipv6Net.filter((n) => n.prefix >= 64 && n.prefix <= 126),
  ipv4Net,
).chain((net: IPNet) => {
  const offset = fc.bigInt({ min: 0n, max: net.size - 1n });
  const addr = (o: bigint) => String(net.ip.add(o));
  return fc.record({
    subnet: mostly(fc.constant(String(net)), 12),
    bounds: fc.tuple(offset, offset, fc.boolean(), fc.boolean(), fc.boolean()),
    gateway: fc.option(
      fc.oneof({ weight: 4, arbitrary: offset.map(addr) }, { weight: 1, arbitrary: anyAddr }),
    ),
    stray: fc.oneof({ weight: 8, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: anyAddr }),
  }).map(({ subnet, bounds: [a, b, start, end, swap], gateway, stray }) => {
    const [lo, hi] = (a <= b) !== swap ? [a, b] : [b, a];
    const r: Record<string, unknown> = { subnet };
    if (start) r.rangeStart = stray ?? addr(lo);
    if (end) r.rangeEnd = addr(hi);
    if (gateway !== null) r.gateway = gateway;
    return r;
  });
});

/** A range set: one or two ranges. */
export const rangeSet = fc.array(ipRange, { minLength: 1, maxLength: 2 });

export const route = fc.record({
  dst: mostly(fc.oneof(ipv4Net, ipv6Net).map(String)),
  gw: mostly(anyAddr),
  mtu: mostly(fc.nat(9000)),
  priority: mostly(fc.nat()),
}, { requiredKeys: ["dst"] });

/** A MAC as written in configs, or a near miss. */
export const mac: fc.Arbitrary<unknown> = mostly(
  fc.oneof(
    fc.uint8Array({ minLength: 6, maxLength: 6 }).map((b) =>
      [...b].map((x) => x.toString(16).padStart(2, "0")).join(":")
    ),
    fc.uint8Array({ minLength: 6, maxLength: 6 }).map((b) =>
      [...b].map((x) => x.toString(16).toUpperCase()).join(":")
    ),
    fc.constantFrom("aa:bb:cc:dd:ee", "aa-bb-cc-dd-ee-ff", "gg:bb:cc:dd:ee:ff"),
  ),
);

/** A port mapping as CRI-O (`hostPort`) or containerd's go-cni (`HostPort`) writes it. */
export const portMapping = fc.record({
  hostPort: mostly(fc.integer({ min: 0, max: 70000 })),
  containerPort: mostly(fc.integer({ min: 0, max: 70000 })),
  protocol: mostly(fc.constantFrom("tcp", "udp", "sctp", "TCP", "icmp", "")),
  hostIP: mostly(fc.oneof(anyAddr, fc.constant(""))),
}, { requiredKeys: ["hostPort", "containerPort", "protocol"] });

/** `runtimeConfig`: the capability arguments a runtime passes. */
export const runtimeConfig = fc.record({
  portMappings: mostly(fc.array(mostly(portMapping, 10), { maxLength: 3 })),
  ips: mostly(fc.array(mostly(fc.oneof(anyAddr, fc.oneof(ipv4Net, ipv6Net).map(String))), { maxLength: 2 })),
  mac,
  ipRanges: mostly(fc.array(rangeSet, { maxLength: 2 })),
  bandwidth: fc.record({ ingressRate: fc.nat() }),
}, { requiredKeys: [] });

/** host-local's `ipam` section. */
export const hostLocalIpam = fc.record({
  type: fc.constant("host-local"),
  ranges: mostly(fc.array(rangeSet, { minLength: 1, maxLength: 2 }), 8),
  routes: mostly(fc.array(route, { maxLength: 3 })),
  dataDir: mostly(fc.constant("/var/lib/cni/networks")),
}, { requiredKeys: ["type"] });

/** Capitalizes (as containerd's go-cni sends struct fields) or lower-cases some keys of `o`, deep. */
export function respell(o: unknown, how: number): unknown {
  if (how === 0 || o === null || typeof o !== "object") return o;
  if (Array.isArray(o)) return o.map((x) => respell(x, how));
  return Object.fromEntries(
    Object.entries(o).map(([k, v], i) => [
      (i + how) % 3 === 0 ? k : how % 2 ? k.slice(0, 1).toUpperCase() + k.slice(1) : k.toLowerCase(),
      respell(v, how),
    ]),
  );
}

/** A whole config document (not yet text): common fields, `ipam`, `runtimeConfig`, and `extra` fields. */
export function netConf<T extends Record<string, unknown>>(
  extra: fc.Arbitrary<T>,
): fc.Arbitrary<Record<string, unknown>> {
  return fc.record({
    cniVersion,
    name: netName,
    type: fc.constant("x"),
    ipam: fc.option(mostly(hostLocalIpam, 10), { freq: 4 }),
    runtimeConfig: fc.option(mostly(runtimeConfig, 10), { freq: 3 }),
    args: fc.option(fc.record({ cni: fc.record({ ips: mostly(fc.array(anyAddr, { maxLength: 2 })), mac }) })),
    extra,
    how: fc.constantFrom(0, 0, 1, 2),
  }).map(({ extra, how, ...c }) => {
    const o: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(c)) if (v !== null) o[k] = v;
    return respell({ ...o, ...extra }, how) as Record<string, unknown>;
  });
}

/** Config text: documents, long values, junk text. */
export function confText<T extends Record<string, unknown>>(extra: fc.Arbitrary<T>): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 8, arbitrary: netConf(extra).map((d) => JSON.stringify(d)) },
    { weight: 1, arbitrary: fc.json({ maxDepth: 2 }) },
    { weight: 1, arbitrary: fc.oneof(anyText, longText) },
  );
}

/**
 * subnet.env as the daemon writes it from a valid net-conf: IPv4 subnets /8–/30 inside a network at least
 * two bits shorter, IPv6 ones /64–/126, the first host address, an MTU and the masquerade switch.
 */
export const daemonSubnetEnv: fc.Arbitrary<SubnetEnv> = fc.record({
  v4: fc.option(ipv4Net.filter((n) => n.prefix >= 10 && n.prefix <= 30)),
  v6: fc.option(ipv6Net.filter((n) => n.prefix >= 66 && n.prefix <= 126)),
  shorter: fc.integer({ min: 2, max: 8 }),
  mtu: fc.integer({ min: 68, max: 9000 }),
  ipMasq: fc.boolean(),
}).filter(({ v4, v6 }) => v4 !== null || v6 !== null).map(({ v4, v6, shorter, mtu, ipMasq }) => {
  const e: SubnetEnv = { mtu, ipMasq };
  if (v4) [e.network, e.subnet] = [new IPNet(v4.ip, v4.prefix - shorter), { ip: v4.ip.add(1), net: v4 }];
  if (v6) {
    [e.ipv6Network, e.ipv6Subnet] = [new IPNet(v6.ip, v6.prefix - shorter), { ip: v6.ip.add(1), net: v6 }];
  }
  return e;
});
