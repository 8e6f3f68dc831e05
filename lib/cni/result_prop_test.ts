/**
 * Properties of CNI results (result.ts): a delegate's output or a chained plugin's `prevResult`, of any spec
 * version. Any JSON value parses to a result or a CniError; a result written in a version's shape and read
 * back is the same result, as far as that shape carries it. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assertEquals } from "../../tests/assert.ts";
import { check, ipv4Net, ipv6Net, outcome } from "../../tests/prop.ts";
import { junk, mostly } from "../../tests/prop_cni.ts";
import { CniError, SUPPORTED_VERSIONS } from "./spec.ts";
import { type CniResult, formatResult, parseResult } from "./result.ts";

const isCniError = (e: unknown) => e instanceof CniError;
const cidr = fc.oneof(ipv4Net, ipv6Net).map((n) => `${n.ip.add(n.size > 2n ? 1n : 0n)}/${n.prefix}`);
const addr = fc.oneof(ipv4Net, ipv6Net).map((n) => String(n.ip));

/** A result as our plugins build it (the internal 1.1.0 shape). */
const result: fc.Arbitrary<CniResult> = fc.record({
  interfaces: fc.array(
    fc.record({
      name: fc.stringMatching(/^[a-z][a-z0-9]{0,14}$/),
      mac: fc.constant("0a:58:0a:f4:01:05"),
      mtu: fc.integer({ min: 68, max: 9000 }),
      sandbox: fc.constant("/var/run/netns/x"),
    }, { requiredKeys: ["name"] }),
    { maxLength: 3 },
  ),
  ips: fc.array(
    fc.record({ interface: fc.nat(2), address: cidr, gateway: addr }, { requiredKeys: ["address"] }),
    { maxLength: 3 },
  ),
  routes: fc.array(
    fc.record({
      dst: cidr,
      gw: addr,
      mtu: fc.nat(9000),
      priority: fc.nat(),
      table: fc.nat(),
      scope: fc.nat(255),
    }, {
      requiredKeys: ["dst"],
    }),
    { maxLength: 3 },
  ),
  dns: fc.record({
    nameservers: fc.array(addr, { minLength: 1, maxLength: 2 }),
    domain: fc.constant("cluster.local"),
    search: fc.array(fc.constantFrom("svc.cluster.local", "cluster.local"), { minLength: 1, maxLength: 2 }),
    options: fc.array(fc.constant("ndots:5"), { minLength: 1, maxLength: 1 }),
  }, { requiredKeys: [] }),
}, { requiredKeys: [] }).map((r) => {
  const o: CniResult = {};
  for (const [k, v] of Object.entries(r)) {
    if (Array.isArray(v) ? v.length : v && Object.keys(v).length) (o as Record<string, unknown>)[k] = v;
  }
  return o;
});

const versions = fc.constantFrom(...SUPPORTED_VERSIONS);

/** `r` in the shape of `v`, or `{}` when that shape cannot carry it (a 0.2.0 result needs an IP address). */
function written(r: CniResult, v: string): Record<string, unknown> {
  const w = outcome(() => formatResult(r, v), isCniError);
  return w.ok ? w.value : {};
}

Deno.test("CNI results (property): any JSON is a result or a CniError, and a result written reads back", () => {
  const anyResult = fc.oneof(
    fc.tuple(result, versions).map(([r, v]) => written(r, v) as unknown),
    fc.tuple(result, versions, junk).map(([r, v, j]) => ({ ...written(r, v), ips: j })),
    mostly(fc.record({ cniVersion: versions, ips: fc.array(mostly(fc.record({ address: mostly(cidr) }))) })),
    fc.jsonValue({ maxDepth: 3 }),
  );
  check(
    fc.property(anyResult, versions, (x, fallback) => {
      const r = outcome(() => parseResult(x, fallback), isCniError);
      if (!r.ok) return;
      // A parsed result can be written in every version (or refused as the spec says, with a CniError).
      for (const v of SUPPORTED_VERSIONS) outcome(() => formatResult(r.value, v), isCniError);
    }),
    500,
  );
});

Deno.test("CNI results (property): a 1.x result read back is the result that was written", () => {
  check(
    fc.property(result, fc.constantFrom("1.0.0", "1.1.0"), (r, v) => {
      const back = parseResult(JSON.parse(JSON.stringify(formatResult(r, v))), "0.1.0");
      assertEquals(formatResult(back, v), formatResult(r, v));
    }),
    300,
  );
});
