/**
 * Properties of the flannel meta plugin's config (loadFlannelConf) and the delegate config it renders from
 * subnet.env (buildDelegate): any config is a CniError or a delegate with the network's name, the node's
 * ranges and routes and the runtime's runtimeConfig unchanged; a delegate section of valid values gives a
 * config the bridge and host-local plugins accept. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../tests/assert.ts";
import { check, outcome } from "../../tests/prop.ts";
import { confText, daemonSubnetEnv, mostly } from "../../tests/prop_cni.ts";
import { CniError, parseNetConf } from "./spec.ts";
import { buildDelegate, loadFlannelConf, plugin } from "./flannel.ts";
import { loadBridgeConf, plugin as bridge } from "./bridge.ts";
import { loadConf as loadHostLocal } from "./host_local.ts";

const isCniError = (e: unknown) => e instanceof CniError;

/** The delegate section's own fields, valid values only. */
const validDelegate = fc.record({
  type: fc.constant("bridge"),
  bridge: fc.constantFrom("cni0", "cbr0"),
  hairpinMode: fc.boolean(),
  isDefaultGateway: fc.boolean(),
  forceAddress: fc.boolean(),
  mtu: fc.integer({ min: 68, max: 9000 }),
  ipMasq: fc.boolean(),
}, { requiredKeys: [] });

const flannelFields = fc.record({
  delegate: mostly(
    fc.oneof(
      validDelegate,
      fc.dictionary(fc.constantFrom("type", "name", "ipam", "x"), fc.jsonValue({ maxDepth: 1 })),
    ),
  ),
  subnetFile: mostly(fc.constant("/run/flannel/subnet.env")),
  dataDir: mostly(fc.constant("/var/lib/cni/flannel")),
}, { requiredKeys: [] });

/**
 * Keys of every object in `x` in sorted order (Go's encoding of a map), as far as a JS object keeps an order:
 * integer-like keys ("0") always come first in one, so `{"":1,"0":2}` cannot be written as Go writes it.
 */
function sortedKeys(x: unknown): boolean {
  if (Array.isArray(x)) return x.every(sortedKeys);
  if (x === null || typeof x !== "object") return true;
  const k = Object.keys(x);
  return JSON.stringify(k) === JSON.stringify(Object.keys(sortedCopy(x) as object)) &&
    Object.values(x).every(sortedKeys);
}

Deno.test("flannel config (property): a CniError, or a delegate for this network, node and runtime", () => {
  check(
    fc.property(confText(flannelFields), daemonSubnetEnv, (stdin, env) => {
      const r = outcome(() => {
        const { conf } = parseNetConf(stdin, plugin.shape);
        return { conf, n: loadFlannelConf(conf) };
      }, isCniError);
      if (!r.ok) return;
      const { conf, n } = r.value;
      const d = buildDelegate(n, env) as Record<string, unknown> & { ipam: Record<string, unknown> };
      assertEquals(d.name, conf.name);
      assertEquals(typeof d.type, "string");
      assertEquals(typeof d.ipam.type, "string");
      const ranges = [env.subnet, env.ipv6Subnet].flatMap((s) => s ? [[{ subnet: String(s.net) }]] : []);
      assertEquals(d.ipam.ranges, ranges);
      const routes = JSON.stringify(d.ipam.routes);
      for (const net of [env.network, env.ipv6Network]) {
        if (net) assert(routes.includes(JSON.stringify({ dst: String(net) })), `a route to ${net}`);
      }
      if (n.runtimeConfig) {
        assertEquals(JSON.stringify(d.runtimeConfig), JSON.stringify(sortedCopy(conf.runtimeConfig)));
      }
      assert(sortedKeys(d), "keys sorted");
    }),
    600,
  );
});

/** `x` with its object keys sorted. */
function sortedCopy(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(sortedCopy);
  if (x === null || typeof x !== "object") return x;
  return Object.fromEntries(
    Object.keys(x).sort().map((k) => [k, sortedCopy((x as Record<string, unknown>)[k])]),
  );
}

Deno.test("flannel delegate (property): valid delegate values give a config bridge and host-local accept", () => {
  const stdin = fc.record({
    cniVersion: fc.constantFrom("0.3.1", "0.4.0", "1.0.0", "1.1.0"),
    name: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
    type: fc.constant("flannel"),
    delegate: fc.option(validDelegate),
  }).map((o) => JSON.stringify(o.delegate === null ? { ...o, delegate: undefined } : o));
  check(
    fc.property(stdin, daemonSubnetEnv, (text, env) => {
      const { conf } = parseNetConf(text, plugin.shape);
      const d = JSON.stringify(buildDelegate(loadFlannelConf(conf), env));
      const { conf: dc, version } = parseNetConf(d, bridge.shape);
      const b = loadBridgeConf(dc, version, "");
      assertEquals(b.ipMasq, (n(conf.delegate)?.ipMasq as boolean | undefined) ?? !env.ipMasq);
      const h = loadHostLocal(dc, version, "");
      assertEquals(h.rangeSets.length, (env.subnet ? 1 : 0) + (env.ipv6Subnet ? 1 : 0));
      for (const [set] of h.rangeSets) {
        const sub = set.subnet.family === 4 ? env.subnet! : env.ipv6Subnet!;
        assertEquals(String(set.subnet), String(sub.net));
        // The node's own address (the bridge's gateway) is the range's gateway.
        assertEquals(String(set.gateway), String(sub.ip));
      }
    }),
    400,
  );
});

const n = (x: unknown) => (x !== null && typeof x === "object" ? x as Record<string, unknown> : undefined);
