/**
 * Properties of the CNI protocol layer (spec.ts, gojson.ts): stdin, the environment and CNI_ARGS as a
 * runtime passes them. Any input is a CniError with a spec code, or parsed values that keep the spec's rules;
 * parsing a parsed config again changes nothing. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../tests/assert.ts";
import { anyText, check, mutated, outcome } from "../../tests/prop.ts";
import { confText } from "../../tests/prop_cni.ts";
import {
  checkCommand,
  CniError,
  ErrCode,
  parseCniArgs,
  parseNetConf,
  readEnv,
  validateIfName,
} from "./spec.ts";
import { goFoldName, NET_CONF } from "./gojson.ts";
import { plugin as bridge } from "./bridge.ts";
import { plugin as flannel } from "./flannel.ts";
import { plugin as portmap } from "./portmap.ts";

const isCniError = (e: unknown) => e instanceof CniError;
const CODES = new Set<number>(Object.values(ErrCode));
const ID_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$/;
const shapes = fc.constantFrom(NET_CONF, bridge.shape!, flannel.shape!, portmap.shape!);

Deno.test("CNI stdin (property): any text is a CniError or a config with a valid name, folded once", () => {
  const text = fc.oneof(confText(fc.constant({})), mutated(confText(fc.constant({}))));
  check(
    fc.property(text, shapes, (stdin, shape) => {
      const r = outcome(() => parseNetConf(stdin, shape), isCniError);
      if (!r.ok) return assert(CODES.has((r.error as CniError).code), `code ${(r.error as CniError).code}`);
      const { conf, version } = r.value;
      assertEquals(typeof version, "string");
      assert(typeof conf.name === "string" && ID_RE.test(conf.name), `name ${JSON.stringify(conf.name)}`);
      // Each struct field appears once, under its canonical name (the plugin reads one spelling).
      const fields = new Map(Object.keys(shape).map((k) => [goFoldName(k), k]));
      for (const k of Object.keys(conf)) {
        const f = fields.get(goFoldName(k));
        assert(f === undefined || f === k, `${k} not folded to ${f}`);
      }
      // Folding is done once: the parsed config, sent again, parses to itself.
      const again = parseNetConf(JSON.stringify(conf), shape);
      assertEquals(JSON.stringify(again.conf), JSON.stringify(conf));
      assertEquals(again.version, version);
    }),
    800,
  );
});

Deno.test("CNI_ARGS (property): a CniError (code 4) or known keys with their values", () => {
  const known = ["IP", "MAC", "K8S_POD_NAME"];
  const pair = fc.tuple(
    fc.oneof(fc.constantFrom(...known, "IgnoreUnknown", "K8S_POD_NAMESPACE"), anyText),
    fc.oneof(fc.constantFrom("1", "true", "0", "false", "10.0.0.2", ""), anyText),
  ).map(([k, v]) => `${k}=${v}`);
  const raw = fc.oneof(fc.array(pair, { maxLength: 4 }).map((p) => p.join(";")), anyText);
  check(
    fc.property(raw, (s) => {
      const r = outcome(() => parseCniArgs(s, known), isCniError);
      if (!r.ok) return assertEquals((r.error as CniError).code, ErrCode.InvalidEnv);
      for (const [k, v] of Object.entries(r.value)) {
        assert(known.includes(k), k);
        assert(!v.includes(";") && !v.includes("="), v);
        assert(s.split(";").includes(`${k}=${v}`), `${k}=${v} was in CNI_ARGS`);
      }
    }),
    500,
  );
});

Deno.test("CNI environment (property): a CniError (code 4) or a verb with a valid container ID and ifname", () => {
  const env = fc.record({
    CNI_COMMAND: fc.oneof(
      fc.constantFrom("ADD", "DEL", "CHECK", "STATUS", "GC", "VERSION", "add", ""),
      anyText,
    ),
    CNI_CONTAINERID: fc.oneof(fc.stringMatching(/^[a-f0-9]{1,64}$/), anyText),
    CNI_NETNS: fc.oneof(fc.constant("/var/run/netns/x"), anyText),
    CNI_IFNAME: fc.oneof(fc.constantFrom("eth0", "net1", ".", "..", "a".repeat(16), "é".repeat(8)), anyText),
    CNI_PATH: fc.oneof(fc.constant("/opt/cni/bin"), anyText),
    CNI_ARGS: fc.oneof(fc.constant("IgnoreUnknown=1"), anyText),
  }, { requiredKeys: [] });
  check(
    fc.property(env, (e) => {
      const r = outcome(() => {
        const a = readEnv((k) => (e as Record<string, string | undefined>)[k], "{}");
        checkCommand(a);
        return a;
      }, isCniError);
      if (!r.ok) return assertEquals((r.error as CniError).code, ErrCode.InvalidEnv);
      const a = r.value;
      assert(["ADD", "DEL", "CHECK", "STATUS", "GC", "VERSION"].includes(a.command), a.command);
      if (a.command === "ADD" || a.command === "DEL" || a.command === "CHECK") {
        assert(ID_RE.test(a.containerId), a.containerId);
        validateIfName(a.ifname);
      }
      assert(a.path.every((p) => p !== "" && !p.includes(":")), "CNI_PATH split on ':'");
    }),
    500,
  );
});
