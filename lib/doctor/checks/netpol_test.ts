import { assertEquals } from "../../../tests/assert.ts";
import { IPNet } from "../../base/cidr.ts";
import { compile } from "../../netpol/plan.ts";
import { drift, nodeOfSubnet, tableView } from "./netpol.ts";
import { CASES } from "../../../tests/netpol_cases.ts";
import { caseObjects, clusterOf } from "../../../tests/netpol_fixture.ts";

/** The lines `nft list ruleset` gives for the plan's chains and maps (trimmed, as nftTable returns them). */
function listed(plan: ReturnType<typeof compile>): string[] {
  const out: string[] = [];
  for (const m of ["in4", "in6", "eg4", "eg6"] as const) {
    const els = [...plan.maps[m]].map(([ip, c]) => `${ip} : goto ${c}`);
    out.push(`map ${m} {`, `type ${m.endsWith("4") ? "ipv4_addr" : "ipv6_addr"} : verdict`);
    if (els.length) out.push(`elements = { ${els.join(",")} }`);
    out.push("}");
  }
  for (const name of plan.chains.keys()) out.push(`chain ${name} {`, "counter packets 0 bytes 0 drop", "}");
  return out;
}

Deno.test("doctor netpol: the node of a subnet, the kernel table against the API's plan", () => {
  const o = caseObjects(CASES.find((c) => c.name.startsWith("several policies"))!);
  const c = clusterOf(o.pods, o.namespaces, o.policies);
  const subnets = [IPNet.parse("10.99.1.0/24"), IPNet.parse("fd99::1:0/112")];
  assertEquals(nodeOfSubnet(c, subnets), "n1");
  const plan = compile({ cluster: c, node: "n1", podCidrs: subnets });
  const lines = listed(plan);
  assertEquals(tableView(lines).chains.size, plan.chains.size);
  assertEquals(drift(plan, lines), []);
  // A chain gone and a map entry pointing elsewhere: both named.
  const [first] = plan.chains.keys();
  const edited = lines.filter((l) => l !== `chain ${first} {`).map((l) =>
    l.replace("10.99.1.10 : goto", "10.99.1.99 : goto")
  );
  const d = drift(plan, edited);
  assertEquals(d.some((x) => x.startsWith(`chain ${first} (`) && x.endsWith("missing")), true, d.join("\n"));
  assertEquals(d.some((x) => x.startsWith("in4 10.99.1.10 should go to")), true, d.join("\n"));
  assertEquals(d.some((x) => x === "in4 10.99.1.99 not in the API's plan"), true, d.join("\n"));
});
