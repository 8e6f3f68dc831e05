/**
 * Properties of subnet.env (the file the daemon writes and the CNI plugin reads, on every pod start): any
 * text parses to a well-formed SubnetEnv or a SubnetEnvError with a bounded, escaped message; what the
 * daemon writes parses back to what it wrote; a parsed file written again parses the same. Seeds:
 * tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../tests/assert.ts";
import {
  anyText,
  assertQuotable,
  check,
  ipv4Addr,
  ipv6Addr,
  longText,
  mutated,
  outcome,
} from "../../tests/prop.ts";
import { type IPAddr, IPNet } from "../base/cidr.ts";
import { formatSubnetEnv, parseSubnetEnv, type SubnetEnv, SubnetEnvError } from "./subnet_env.ts";

const isEnvError = (e: unknown) => e instanceof SubnetEnvError;

/** A host address with its subnet (FLANNEL_SUBNET: the first host IP and the subnet's prefix). */
const hostIn = (addr: fc.Arbitrary<IPAddr>, bits: number) =>
  fc.tuple(addr, fc.integer({ min: 0, max: bits })).map(([ip, p]) => ({ ip, net: new IPNet(ip, p) }));

/** A SubnetEnv the daemon writes: IPv4, dual stack or IPv6 only. */
const subnetEnv: fc.Arbitrary<SubnetEnv> = fc.record({
  v4: fc.option(fc.tuple(hostIn(ipv4Addr, 32), fc.integer({ min: 0, max: 32 }))),
  v6: fc.option(fc.tuple(hostIn(ipv6Addr, 128), fc.integer({ min: 0, max: 128 }))),
  mtu: fc.integer({ min: 68, max: 65535 }),
  ipMasq: fc.boolean(),
}).filter(({ v4, v6 }) => v4 !== null || v6 !== null).map(({ v4, v6, mtu, ipMasq }) => {
  const e: SubnetEnv = { mtu, ipMasq };
  if (v4) [e.subnet, e.network] = [v4[0], new IPNet(v4[0].ip, Math.min(v4[1], v4[0].net.prefix))];
  if (v6) [e.ipv6Subnet, e.ipv6Network] = [v6[0], new IPNet(v6[0].ip, Math.min(v6[1], v6[0].net.prefix))];
  return e;
});

const KEYS = [
  "FLANNEL_NETWORK",
  "FLANNEL_SUBNET",
  "FLANNEL_IPV6_NETWORK",
  "FLANNEL_IPV6_SUBNET",
  "FLANNEL_MTU",
  "FLANNEL_IPMASQ",
];

/** A value for any key: a CIDR of either family, a number, a boolean, junk. */
const anyValue = fc.oneof(
  ipv4Addr.chain((a) => fc.integer({ min: 0, max: 40 }).map((p) => `${a}/${p}`)),
  ipv6Addr.chain((a) => fc.integer({ min: 0, max: 130 }).map((p) => `${a}/${p}`)),
  fc.integer({ min: -10, max: 70000 }).map(String),
  fc.constantFrom("true", "false", "True", "", " 1450 ", "1e3", "0x5dc"),
  anyText,
  longText,
);

/** Lines of a file: KEY=value (keys known, misspelt or junk), comments, blank lines, lines without `=`. */
const envText = fc.tuple(
  fc.array(
    fc.oneof(
      {
        weight: 6,
        arbitrary: fc.tuple(
          fc.oneof(fc.constantFrom(...KEYS), fc.mixedCase(fc.constantFrom(...KEYS)), anyText),
          fc.constantFrom("=", " = ", "=="),
          anyValue,
        ).map(([k, eq, v]) => k + eq + v),
      },
      { weight: 1, arbitrary: fc.constantFrom("", "# a comment", "  ", "\r") },
      { weight: 1, arbitrary: anyText },
    ),
    { maxLength: 9 },
  ),
  fc.constantFrom("\n", "\r\n"),
).map(([lines, eol]) => lines.join(eol));

const anyFile = fc.oneof(
  subnetEnv.map(formatSubnetEnv),
  mutated(subnetEnv.map(formatSubnetEnv)),
  envText,
  fc.tuple(subnetEnv.map(formatSubnetEnv), envText).map(([a, b]) => a + b),
  anyText,
);

/** The checks every parsed file passes. */
function assertWellFormed(e: SubnetEnv): void {
  assert(Number.isInteger(e.mtu) && e.mtu >= 68 && e.mtu <= 65535, `mtu ${e.mtu}`);
  assertEquals(typeof e.ipMasq, "boolean");
  assert(e.network !== undefined || e.ipv6Network !== undefined, "a network");
  assertEquals(e.network === undefined, e.subnet === undefined);
  assertEquals(e.ipv6Network === undefined, e.ipv6Subnet === undefined);
  for (const s of [e.subnet, e.ipv6Subnet]) {
    if (s) assert(s.net.contains(s.ip) && s.net.family === s.ip.family, `${s.ip} in ${s.net}`);
  }
}

const same = (a: SubnetEnv, b: SubnetEnv) => assertEquals(formatSubnetEnv(a), formatSubnetEnv(b));

Deno.test("subnet.env (property): any text is a well-formed SubnetEnv or a SubnetEnvError", () => {
  check(
    fc.property(anyFile, (text) => {
      const r = outcome(() => parseSubnetEnv(text, "/run/flannel/subnet.env"), isEnvError);
      if (!r.ok) return assertQuotable(r.error.message);
      assertWellFormed(r.value);
      // What was read, written again, reads the same (the file is its own fixed point).
      same(parseSubnetEnv(formatSubnetEnv(r.value)), r.value);
    }),
    1000,
  );
});

Deno.test("subnet.env (property): what the daemon writes parses back to what it wrote", () => {
  check(
    fc.property(subnetEnv, (e) => {
      const back = parseSubnetEnv(formatSubnetEnv(e));
      assertWellFormed(back);
      same(back, e);
      for (const k of ["network", "ipv6Network"] as const) assertEquals(String(back[k]), String(e[k]));
      for (const k of ["subnet", "ipv6Subnet"] as const) {
        assertEquals([String(back[k]?.ip), String(back[k]?.net)], [String(e[k]?.ip), String(e[k]?.net)]);
      }
    }),
    500,
  );
});
