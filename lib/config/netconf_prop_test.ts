/**
 * Properties of net-conf.json parsing (the kube-flannel ConfigMap, the etcd config key): any text gives a
 * NetConfig that keeps flannel's rules (subnet length inside the network's room, SubnetMin/Max on the
 * network and the length) or a ConfigError; an accepted config written out again parses the same.
 * Seeds: tests/prop.ts.
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
import { IPNet } from "../base/cidr.ts";
import { ConfigError, KNOWN_BACKENDS, parseNetConfig } from "./netconf.ts";
import type { NetConfig } from "./types.ts";

const quiet = { warn: () => {} };
const isConfigError = (e: unknown) => e instanceof ConfigError;

/** One family's fields: a network of a useful size, often a SubnetLen and SubnetMin/Max, on boundaries or not. */
function familyFields(v6: boolean) {
  const bits = v6 ? 128 : 32;
  const addr = v6 ? ipv6Addr : ipv4Addr;
  return fc.record({
    net: fc.tuple(addr, fc.integer({ min: v6 ? 40 : 4, max: v6 ? 126 : 30 })).map(([a, p]) =>
      new IPNet(a, p)
    ),
    /** SubnetLen: none, any, or a few bits longer than the network's prefix (mostly valid). */
    len: fc.option(fc.oneof(fc.integer({ min: 0, max: bits }), fc.integer({ min: -1, max: 8 })), { freq: 2 }),
    /** SubnetMin/Max as an offset (in subnets) from the network's start, or any address. */
    min: fc.option(fc.oneof(fc.bigInt({ min: 0n, max: 70n }), addr), { freq: 2 }),
    max: fc.option(fc.oneof(fc.bigInt({ min: 0n, max: 70n }), addr), { freq: 2 }),
  }).map(({ net, len, min, max }) => {
    const p = v6 ? "IPv6" : "";
    const o: Record<string, unknown> = { [`${p}Network`]: String(net) };
    // A small SubnetLen is taken as that many bits more than the network's prefix.
    const l = len === null ? null : len <= 8 ? net.prefix + 2 + len : len;
    if (l !== null) o[`${p}SubnetLen`] = l;
    const subnetLen = Math.min(l ?? net.prefix + 2, bits);
    const at = (x: bigint | object) =>
      typeof x === "bigint"
        ? String(net.ip.add(x << BigInt(bits - subnetLen) < net.size ? x << BigInt(bits - subnetLen) : 0n))
        : String(x);
    if (min !== null) o[`${p}SubnetMin`] = at(min);
    if (max !== null) o[`${p}SubnetMax`] = at(max);
    return o;
  });
}

/** A net-conf document: IPv4, dual stack or IPv6 only; a backend; field names in any case; some junk values. */
const netConfDoc = fc.record({
  v4: familyFields(false),
  v6: fc.option(familyFields(true)),
  enable4: fc.option(
    fc.oneof(fc.constant(true), fc.boolean(), fc.jsonValue({ maxDepth: 0 }) as fc.Arbitrary<unknown>),
    {
      freq: 2,
    },
  ),
  backend: fc.option(
    fc.oneof(
      fc.record({
        Type: fc.oneof(
          fc.constantFrom(...KNOWN_BACKENDS),
          fc.mixedCase(fc.constantFrom(...KNOWN_BACKENDS)),
          anyText,
        ),
      }),
      fc.record({ Type: fc.constant("vxlan"), VNI: fc.nat(), Port: fc.nat(65535) }),
      fc.jsonValue({ maxDepth: 1 }) as fc.Arbitrary<unknown>,
    ),
    { freq: 4 },
  ),
  nft: fc.option(
    fc.oneof({ weight: 4, arbitrary: fc.boolean() }, {
      weight: 1,
      arbitrary: fc.jsonValue({ maxDepth: 0 }) as fc.Arbitrary<unknown>,
    }),
    { freq: 2 },
  ),
  junk: fc.dictionary(
    fc.oneof(fc.constantFrom("Network", "SubnetLen", "EnableIPv6", "Backend"), anyText),
    fc.jsonValue({ maxDepth: 1 }),
    { maxKeys: 1 },
  ),
  recase: fc.boolean(),
}).map(({ v4, v6, enable4, backend, nft, junk, recase }) => {
  const o: Record<string, unknown> = { ...v4 };
  if (v6) Object.assign(o, v6, { EnableIPv6: true });
  if (enable4 !== null) o.EnableIPv4 = enable4;
  if (backend !== null) o.Backend = backend;
  if (nft !== null) o.EnableNFTables = nft;
  Object.assign(o, junk);
  // Go's encoding/json matches field names case-insensitively.
  return recase
    ? Object.fromEntries(Object.entries(o).map(([k, v], i) => [i % 2 ? k.toLowerCase() : k.toUpperCase(), v]))
    : o;
});

const anyText2 = fc.oneof(
  netConfDoc.map((d) => JSON.stringify(d)),
  netConfDoc.map((d) => JSON.stringify(d, null, 2)),
  mutated(netConfDoc.map((d) => JSON.stringify(d))),
  fc.json({ maxDepth: 2 }),
  anyText,
  longText,
);

/** flannel's rules for one family of an accepted config. */
function assertFamily(
  net: IPNet | null,
  len: number,
  min: IPNet | null,
  max: IPNet | null,
  v6: boolean,
): void {
  assert(net !== null && min !== null && max !== null, "network, SubnetMin and SubnetMax are set");
  assertEquals(net.family, v6 ? 6 : 4);
  assert(net.prefix > 0, "not a /0 network");
  assert(len >= net.prefix + 2 && len <= (v6 ? 126 : 30), `SubnetLen ${len} for ${net}`);
  for (const s of [min, max]) {
    assertEquals(s.prefix, len);
    assert(net.contains(s), `${s} inside ${net}`);
  }
}

/** The config as a net-conf document (what the parser would need to give it again). */
function render(c: NetConfig): string {
  const o: Record<string, unknown> = { EnableIPv4: c.enableIPv4, EnableIPv6: c.enableIPv6 };
  if (c.enableIPv4) {
    Object.assign(o, {
      Network: String(c.network),
      SubnetLen: c.subnetLen,
      SubnetMin: String(c.subnetMin!.ip),
      SubnetMax: String(c.subnetMax!.ip),
    });
  }
  if (c.enableIPv6) {
    Object.assign(o, {
      IPv6Network: String(c.ipv6Network),
      IPv6SubnetLen: c.ipv6SubnetLen,
      IPv6SubnetMin: String(c.ipv6SubnetMin!.ip),
      IPv6SubnetMax: String(c.ipv6SubnetMax!.ip),
    });
  }
  return JSON.stringify({ ...o, Backend: c.backend.raw, EnableNFTables: c.enableNFTables });
}

/** The parsed values (without the source text). */
const values = (c: NetConfig) => JSON.stringify({ ...c, source: undefined });

Deno.test("net-conf (property): any text is a config keeping flannel's rules, or a ConfigError", () => {
  check(
    fc.property(anyText2, (text) => {
      const r = outcome(() => parseNetConfig(text, quiet), isConfigError);
      if (!r.ok) return assertQuotable(r.error.message);
      const c = r.value;
      assert(c.enableIPv4 || c.enableIPv6, "a family is enabled");
      if (c.enableIPv4) assertFamily(c.network, c.subnetLen, c.subnetMin, c.subnetMax, false);
      else assertEquals([c.network, c.subnetMin, c.subnetMax], [null, null, null]);
      if (c.enableIPv6) assertFamily(c.ipv6Network, c.ipv6SubnetLen, c.ipv6SubnetMin, c.ipv6SubnetMax, true);
      else assertEquals([c.ipv6Network, c.ipv6SubnetMin, c.ipv6SubnetMax], [null, null, null]);
      assert((KNOWN_BACKENDS as readonly string[]).includes(c.backend.type), c.backend.type);
      assertEquals(typeof c.enableNFTables, "boolean");
      assertEquals(c.source, text);
      // Written out with every default made explicit, it parses to the same config.
      assertEquals(values(parseNetConfig(render(c), quiet)), values(c));
    }),
    1000,
  );
});
