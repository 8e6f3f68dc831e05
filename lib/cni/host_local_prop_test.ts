/**
 * Properties of host-local's config parsing (loadConf: `ipam` ranges and routes, the requested IPs from
 * CNI_ARGS, `args.cni.ips` and `runtimeConfig.ips`, `runtimeConfig.ipRanges`): any config is a CniError or
 * range sets an allocator can use as they are (each range inside its subnet and ordered, one family per
 * set, no overlaps), and a range written out again canonicalizes to itself. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../tests/assert.ts";
import { anyText, check, outcome } from "../../tests/prop.ts";
import { confText, ipRange, rangeSet, route } from "../../tests/prop_cni.ts";
import { CniError, ErrCode, parseNetConf } from "./spec.ts";
import { canonicalizeRange, type IPRange, loadConf, plugin, rangeContains, rangeIter } from "./host_local.ts";

const isCniError = (e: unknown) => e instanceof CniError;
const CODES = new Set<number>(Object.values(ErrCode));

const cniArgs = fc.oneof(
  fc.constant(""),
  fc.constantFrom("IP=10.244.1.7", "IP=10.244.1.7,fc00::7", "IgnoreUnknown=1;IP=x", "IP="),
  anyText,
);

/** Configs whose every field has the right type (so most of what fails is a range's own check). */
const typedConf = fc.record({
  cniVersion: fc.constantFrom("0.3.1", "1.0.0", "1.1.0"),
  name: fc.constant("pods"),
  ipam: fc.record({
    type: fc.constant("host-local"),
    ranges: fc.array(rangeSet, { minLength: 1, maxLength: 2 }),
    routes: fc.array(route, { maxLength: 2 }),
  }, { requiredKeys: ["type", "ranges"] }),
  runtimeConfig: fc.record({ ips: fc.array(fc.constantFrom("10.244.1.7", "fc00::7/64"), { maxLength: 1 }) }),
}, { requiredKeys: ["cniVersion", "name", "ipam"] }).map((c) => JSON.stringify(c));

const overlaps = (a: IPRange, b: IPRange) =>
  a.subnet.family === b.subnet.family &&
    [a.rangeStart, a.rangeEnd].some((ip) => rangeContains(b, ip)) ||
  [b.rangeStart, b.rangeEnd].some((ip) => rangeContains(a, ip));

Deno.test("host-local config (property): a CniError, or range sets an allocator can use", () => {
  check(
    fc.property(fc.oneof(confText(fc.constant({})), typedConf), cniArgs, (stdin, args) => {
      const r = outcome(() => {
        const { conf, version } = parseNetConf(stdin, plugin.shape);
        return loadConf(conf, version, args);
      }, isCniError);
      if (!r.ok) return assert(CODES.has((r.error as CniError).code), r.error.message);
      const c = r.value;
      assert(c.rangeSets.length > 0, "a range set");
      const all = c.rangeSets.flat();
      for (const set of c.rangeSets) {
        assert(set.length > 0 && set.every((x) => x.subnet.family === set[0].subnet.family), "one family");
      }
      for (const x of all) {
        assert(x.subnet.prefix <= x.subnet.ip.bits - 2, `${x.subnet} has room`);
        assert(x.subnet.contains(x.rangeStart) && x.subnet.contains(x.rangeEnd), "range inside its subnet");
        assert(x.rangeStart.compare(x.rangeEnd) <= 0, "start before end");
        assertEquals(x.gateway.family, x.subnet.family);
      }
      for (let i = 0; i < all.length; i++) {
        for (let j = i + 1; j < all.length; j++) {
          assert(!overlaps(all[i], all[j]), `${all[i].subnet} overlaps`);
        }
      }
      for (const ip of c.requested) assert(ip.family === 4 || ip.family === 6);
      assertEquals(typeof c.dataDir, "string");
      // The allocator's walk stays in the set and never hands out the gateway.
      for (const set of c.rangeSets) {
        let n = 0;
        for (const [ip, rg] of rangeIter(set, null)) {
          assert(rangeContains(rg, ip) && !ip.equals(rg.gateway), `${ip} from ${rg.subnet}`);
          if (++n >= 8) break;
        }
      }
    }),
    800,
  );
});

Deno.test("host-local range (property): a canonical range written out canonicalizes to itself", () => {
  check(
    fc.property(ipRange, (raw) => {
      const r = outcome(() => canonicalizeRange(raw, "range"), isCniError);
      if (!r.ok) return;
      const x = r.value;
      const text = {
        subnet: String(x.subnet),
        rangeStart: String(x.rangeStart),
        rangeEnd: String(x.rangeEnd),
        gateway: String(x.gateway),
      };
      const y = canonicalizeRange(text, "range");
      assertEquals(
        [String(y.subnet), String(y.rangeStart), String(y.rangeEnd), String(y.gateway)],
        Object.values(text),
      );
    }),
    500,
  );
});
