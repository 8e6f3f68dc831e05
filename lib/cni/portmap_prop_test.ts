/**
 * Properties of the portmap plugin's config (`runtimeConfig.portMappings` as CRI-O and containerd's go-cni
 * spell it, and the plugin's own options): any config is a CniError or mappings the firewall rules can be
 * built from (ports 1–65535, tcp/udp/sctp, an IP address or none), and validated mappings validate to
 * themselves. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../tests/assert.ts";
import { check, outcome } from "../../tests/prop.ts";
import { confText, mostly } from "../../tests/prop_cni.ts";
import { IPAddr } from "../base/cidr.ts";
import { CniError, ErrCode, parseNetConf } from "./spec.ts";
import { parseConf, parseMappings, plugin } from "./portmap.ts";

const isCniError = (e: unknown) => e instanceof CniError;

const portmapFields = fc.record({
  backend: fc.constantFrom("iptables", "nftables"),
  snat: mostly(fc.boolean()),
  masqAll: mostly(fc.boolean()),
  markMasqBit: mostly(fc.integer({ min: -1, max: 33 })),
  externalSetMarkChain: mostly(fc.constantFrom("KUBE-MARK-MASQ", "bad chain", "X".repeat(29))),
  conditionsV4: mostly(fc.array(fc.constantFrom("-s", "1.2.3.4", "ip saddr 1.2.3.4"), { maxLength: 2 })),
}, { requiredKeys: ["backend"] });

Deno.test("portmap config (property): a CniError, or mappings and options the rules can be built from", () => {
  check(
    fc.property(confText(portmapFields), (stdin) => {
      const r = outcome(() => {
        const { conf } = parseNetConf(stdin, plugin.shape);
        return parseConf(conf);
      }, isCniError);
      if (!r.ok) return;
      const c = r.value;
      for (const m of c.mappings) {
        for (const p of [m.hostPort, m.containerPort]) {
          assert(Number.isInteger(p) && p >= 1 && p <= 65535, `${p}`);
        }
        assert(["tcp", "udp", "sctp"].includes(m.protocol), m.protocol);
        assert(m.hostIP === undefined || IPAddr.tryParse(m.hostIP) !== null, `${m.hostIP}`);
      }
      assert(
        Number.isInteger(c.markMasqBit) && c.markMasqBit >= 0 && c.markMasqBit <= 31,
        `${c.markMasqBit}`,
      );
      assert(c.backend === "iptables" || c.backend === "nftables");
      assertEquals(parseMappings(JSON.parse(JSON.stringify(c.mappings))), c.mappings);
    }),
    600,
  );
});

Deno.test("portmap mappings (property): any value is a CniError (code 7) or valid mappings", () => {
  check(
    fc.property(fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.array(fc.jsonValue({ maxDepth: 2 }))), (raw) => {
      const r = outcome(() => parseMappings(raw), isCniError);
      if (!r.ok) return assertEquals((r.error as CniError).code, ErrCode.InvalidNetworkConfig);
      assertEquals(parseMappings(r.value), r.value);
    }),
    300,
  );
});
