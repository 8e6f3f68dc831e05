import fc from "fast-check";
import { check } from "../../tests/prop.ts";
import { NetpolModelError, parseNamespace, parsePod, parsePolicy } from "./model.ts";
import { compile } from "./plan.ts";
import { fullScript } from "./render.ts";

/** Only the model's typed error may escape a parser. */
function typed(fn: () => unknown): void {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof NetpolModelError)) throw e;
  }
}

const junkish = fc.oneof(
  fc.anything(),
  fc.record({
    metadata: fc.record({
      namespace: fc.oneof(fc.constant("x"), fc.string(), fc.anything()),
      name: fc.oneof(fc.constant("p"), fc.string(), fc.anything()),
      labels: fc.oneof(fc.dictionary(fc.string(), fc.string()), fc.anything()),
    }, { requiredKeys: [] }),
    spec: fc.oneof(
      fc.anything(),
      fc.record({
        podSelector: fc.anything(),
        ingress: fc.oneof(fc.anything(), fc.array(fc.record({ from: fc.anything(), ports: fc.anything() }))),
        egress: fc.anything(),
        policyTypes: fc.anything(),
        containers: fc.anything(),
        nodeName: fc.anything(),
        hostNetwork: fc.anything(),
      }, { requiredKeys: [] }),
    ),
    status: fc.oneof(
      fc.anything(),
      fc.record({ podIPs: fc.anything(), podIP: fc.anything(), phase: fc.anything() }),
    ),
  }, { requiredKeys: [] }),
);

Deno.test("netpol property: hostile API objects give the model's error or a usable object, and compile", () => {
  check(
    fc.property(junkish, (raw) => {
      typed(() => parsePod(raw));
      typed(() => parseNamespace(raw));
      let pol = null;
      try {
        pol = parsePolicy(raw);
      } catch (e) {
        if (!(e instanceof NetpolModelError)) throw e;
      }
      if (!pol) return;
      // Whatever was accepted compiles into a table (a refused one fails closed: both directions isolated).
      if (pol.invalid) {
        if (!pol.types.ingress || !pol.types.egress || pol.ingress.length || pol.egress.length) {
          throw new Error("a refused policy must fail closed");
        }
        if (pol.invalid.length > 200) throw new Error("the reason must be short (it is logged)");
      }
      const pods = new Map([["x/a", {
        namespace: "x",
        name: "a",
        labels: {},
        ips: [],
        node: "n",
        hostNetwork: false,
        terminal: false,
        ports: [],
      }]]);
      fullScript(
        compile({
          cluster: { pods, namespaces: new Map(), policies: new Map([["x/p", pol]]) },
          node: "n",
          podCidrs: [],
        }),
      );
    }),
    400,
  );
});
