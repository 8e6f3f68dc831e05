/**
 * Properties of the etcd lease wire format (key + JSON value → lease): whatever a store holds, decoding
 * either gives a lease that is flannel's form or a MalformedLeaseError; what flanctl writes reads back.
 * Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../tests/assert.ts";
import {
  anyText,
  assertQuotable,
  check,
  ipv4Addr,
  ipv4Net,
  ipv6Addr,
  ipv6Net,
  longText,
  mutated,
  outcome,
} from "../../tests/prop.ts";
import { IPAddr } from "../base/cidr.ts";
import {
  encodeLeaseAttrs,
  keyOf,
  leaseFromKV,
  leaseKey,
  MalformedLeaseError,
  validateLeaseAttrs,
} from "./wire.ts";
import type { LeaseAttrsWire } from "./types.ts";

const isMalformed = (e: unknown) => e instanceof MalformedLeaseError;

/** Attributes as flanctl (or flanneld) writes them. */
export const leaseAttrs: fc.Arbitrary<LeaseAttrsWire> = fc.record({
  PublicIP: ipv4Addr.map(String),
  PublicIPv6: fc.option(ipv6Addr.map(String)),
  BackendType: fc.constantFrom("vxlan", "host-gw", "", "udp", "wireguard"),
  BackendData: fc.option(fc.oneof(
    fc.record({ VNI: fc.nat(), VtepMAC: fc.constant("aa:bb:cc:dd:ee:ff") }),
    fc.jsonValue({ maxDepth: 3 }),
  )),
  BackendV6Data: fc.option(fc.jsonValue({ maxDepth: 2 })),
}, { requiredKeys: ["PublicIP", "BackendType"] }).map((a) => {
  const out: LeaseAttrsWire = { ...a };
  if (out.BackendData === null) delete out.BackendData;
  if (out.BackendV6Data === null) delete out.BackendV6Data;
  return out;
});

/** A key flanctl writes: an IPv4 subnet, dual stack, or IPv6 only (`0.0.0.0-0&…`). */
const validKey = fc.oneof(
  ipv4Net.filter((n) => n.prefix > 0 || n.ip.value !== 0n).map((n) => leaseKey(n)),
  fc.tuple(ipv4Net, ipv6Net).map(([a, b]) => leaseKey(a, b)),
  ipv6Net.map((n) => leaseKey(null, n)),
);

/** An IPv6 address as text: canonical, fully written out, or with leading zeros. */
const v6Text = fc.tuple(ipv6Addr, fc.constantFrom("canonical", "full", "padded")).map(([a, form]) => {
  if (form === "canonical") return String(a);
  const groups = Array.from({ length: 8 }, (_, i) => (a.value >> BigInt(112 - 16 * i)) & 0xffffn);
  return groups.map((g) => form === "full" ? g.toString(16) : g.toString(16).padStart(4, "0")).join(":");
});

/** Keys put together from parts: host bits set, any prefix length, IPv6 text in several forms. */
const partsKey = fc.tuple(ipv4Addr, fc.nat(40), fc.option(fc.tuple(v6Text, fc.nat(140)))).map(
  ([a, p, v6]) => `${a}-${p}${v6 ? `&${v6[0]}-${v6[1]}` : ""}`,
);

/** Keys: valid ones, put together from parts, edited ones, text of the key alphabet, anything. */
const anyKey = fc.oneof(
  validKey,
  partsKey,
  mutated(validKey),
  fc.string({ unit: fc.constantFrom(..."0123456789.-&:abcdefABCDEF/"), maxLength: 48 }),
  anyText,
  longText,
);

/** A value object with field names in any case, values of any JSON type (often the right one). */
const valueObject = fc.record({
  names: fc.tuple(
    ...["PublicIP", "PublicIPv6", "BackendType", "BackendData"].map((n) => fc.mixedCase(fc.constant(n))),
  ),
  pub: fc.oneof(ipv4Addr.map(String), ipv6Addr.map(String), fc.jsonValue({ maxDepth: 1 }), longText),
  pub6: fc.oneof(
    ipv6Addr.map(String),
    ipv4Addr.map(String),
    fc.constant(null),
    fc.jsonValue({ maxDepth: 1 }),
  ),
  bt: fc.oneof(
    fc.constantFrom("vxlan", ""),
    fc.jsonValue({ maxDepth: 1 }),
    fc.array(longText, { maxLength: 2 }),
  ),
  bd: fc.jsonValue({ maxDepth: 2 }),
  extra: fc.dictionary(anyText, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
}).map(({ names, pub, pub6, bt, bd, extra }) => {
  const o: Record<string, unknown> = { ...extra };
  [pub, pub6, bt, bd].forEach((v, i) => (o[names[i]] = v));
  return JSON.stringify(o);
});

const anyValue = fc.oneof(
  leaseAttrs.map(encodeLeaseAttrs),
  valueObject,
  mutated(leaseAttrs.map(encodeLeaseAttrs)),
  fc.json({ maxDepth: 2 }),
  anyText,
  longText,
);

Deno.test("lease wire (property): any key and value decode to flannel's form or MalformedLeaseError", () => {
  check(
    fc.property(anyKey, anyValue, (key, value) => {
      const r = outcome(() => leaseFromKV(key, value, null), isMalformed);
      if (!r.ok) return assertQuotable(r.error.message);
      const l = r.value;
      assert(l.subnet !== null || l.ipv6Subnet !== null, "a lease has a subnet");
      assert(l.subnet === null || l.subnet.family === 4, "subnet is IPv4");
      assert(l.ipv6Subnet === null || l.ipv6Subnet.family === 6, "ipv6Subnet is IPv6");
      // An accepted key is the one flannel writes for that lease: renew, delete and compare-and-swap find it.
      assertEquals(keyOf(l), key);
      assertEquals(IPAddr.tryParse(l.attrs.PublicIP)?.family, 4);
      const v6 = l.attrs.PublicIPv6;
      assert(v6 === null || v6 === undefined || IPAddr.tryParse(v6)?.family === 6, "PublicIPv6 is IPv6");
      assertEquals(typeof l.attrs.BackendType, "string");
      // What was accepted passes the validator again, unchanged.
      assertEquals(encodeLeaseAttrs(validateLeaseAttrs(key, l.attrs)), encodeLeaseAttrs(l.attrs));
    }),
    1000,
  );
});

Deno.test("lease wire (property): lease → key + value → lease is the identity", () => {
  const subnets = fc.oneof(
    ipv4Net.filter((n) => n.prefix > 0).map((n) => [n, null] as const),
    fc.tuple(ipv4Net.filter((n) => n.prefix > 0), ipv6Net),
    ipv6Net.map((n) => [null, n] as const),
  );
  check(
    fc.property(subnets, leaseAttrs, ([subnet, ipv6Subnet], attrs) => {
      const key = leaseKey(subnet, ipv6Subnet);
      const value = encodeLeaseAttrs(attrs);
      const l = leaseFromKV(key, value, null, "7");
      assertEquals([String(l.subnet), String(l.ipv6Subnet)], [String(subnet), String(ipv6Subnet)]);
      assertEquals(encodeLeaseAttrs(l.attrs), value);
      assertEquals(l.attrs.PublicIPv6 ?? null, attrs.PublicIPv6 ?? null);
      assertEquals(l.revision, "7");
    }),
    500,
  );
});
