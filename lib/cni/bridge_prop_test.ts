/**
 * Properties of the bridge plugin's config parsing (loadBridgeConf: its fields, the MAC from CNI_ARGS,
 * `runtimeConfig.mac` or `args.cni.mac`): any config is a CniError or a BridgeConf whose values the kernel
 * and the rest of the plugin take. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../tests/assert.ts";
import { anyText, check, outcome } from "../../tests/prop.ts";
import { confText, mac, mostly } from "../../tests/prop_cni.ts";
import { CniError, parseNetConf, validateIfName } from "./spec.ts";
import { loadBridgeConf, plugin } from "./bridge.ts";

const isCniError = (e: unknown) => e instanceof CniError;

/** The bridge's own fields: mostly valid, some near misses (names of 15 characters but more bytes, "."). */
const bridgeFields = fc.record({
  bridge: mostly(
    fc.oneof(
      fc.stringMatching(/^[a-z][a-z0-9]{0,14}$/),
      fc.constantFrom("cni0", ".", "..", "a b", "x".repeat(16), "é".repeat(8), "ab/c", "br:0"),
      fc.string({ unit: "grapheme", minLength: 1, maxLength: 15 }),
    ),
  ),
  mtu: mostly(fc.oneof(fc.constantFrom(0, 1450, 1500, 9000), fc.integer({ min: -1, max: 70000 }))),
  isGateway: mostly(fc.boolean()),
  isDefaultGateway: mostly(fc.boolean()),
  ipMasq: mostly(fc.boolean()),
  hairpinMode: mostly(fc.boolean()),
  promiscMode: mostly(fc.constant(false)),
  vlan: mostly(fc.constant(0)),
  enabledad: mostly(fc.boolean()),
  dns: mostly(fc.record({ nameservers: fc.array(fc.constant("10.96.0.10"), { maxLength: 1 }) })),
}, { requiredKeys: [] });

const cniArgs = fc.oneof(
  fc.constant(""),
  mac.map((m) => `MAC=${typeof m === "string" ? m : ""}`),
  fc.constant("IgnoreUnknown=1;K8S_POD_NAME=x"),
  anyText,
);

Deno.test("bridge config (property): a CniError, or a config the kernel and the plugin take", () => {
  check(
    fc.property(confText(bridgeFields), cniArgs, (stdin, args) => {
      const r = outcome(() => {
        const { conf, version } = parseNetConf(stdin, plugin.shape);
        return loadBridgeConf(conf, version, args);
      }, isCniError);
      if (!r.ok) return;
      const c = r.value;
      // The bridge's name is a Linux interface name (the kernel refuses any other).
      validateIfName(c.bridge);
      assert(c.mtu === 0 || (c.mtu >= 68 && c.mtu <= 65535), `mtu ${c.mtu}`);
      assert(c.mac === null || /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/.test(c.mac), `mac ${c.mac}`);
      assert(c.ipam === null || typeof c.ipam.type === "string", "ipam has a type");
      assert(!c.isDefaultGateway || c.isGateway, "a default gateway is a gateway");
      for (const k of ["isGateway", "forceAddress", "ipMasq", "hairpinMode", "enableDad"] as const) {
        assertEquals(typeof c[k], "boolean", k);
      }
    }),
    800,
  );
});
