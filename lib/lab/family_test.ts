import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { UsageError } from "../errors.ts";
import { labNetConfFor, subnet6FromEnv, underlayAddrs6, validateIpFamily } from "./family.ts";
import { underlayOctet } from "./paths.ts";

Deno.test("lab ip family: ULA underlay per lab, net-conf per family, --ip-family checked", () => {
  const x = underlayOctet("lab").toString(16);
  const u = underlayAddrs6("lab");
  assertEquals([u.cidr, u.gateway, u.nodeIP(3)], [
    `fc00:1ab:${x}::/64`,
    `fc00:1ab:${x}::1`,
    `fc00:1ab:${x}::d`,
  ]);
  const base = { network: "10.244.0.0/16", backend: "vxlan" as const };
  assertEquals(labNetConfFor(base), `{"Network":"10.244.0.0/16","Backend":{"Type":"vxlan"}}`);
  assertEquals(
    labNetConfFor({ ...base, ipFamily: "dual" }),
    `{"Network":"10.244.0.0/16","EnableIPv6":true,"IPv6Network":"fc00:244::/48","Backend":{"Type":"vxlan"}}`,
  );
  assertEquals(
    labNetConfFor({ ...base, ipFamily: "ipv6" }),
    `{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"fc00:244::/48","Backend":{"Type":"vxlan"}}`,
  );
  validateIpFamily(undefined);
  validateIpFamily("dual");
  assertThrows(() => validateIpFamily("v6"), UsageError, "--ip-family 'v6'");
  assertEquals(
    subnet6FromEnv("FLANNEL_IPV6_SUBNET=fc00:244:0:3::1/64\nFLANNEL_MTU=1430\n"),
    "fc00:244:0:3::/64",
  );
  assertEquals(subnet6FromEnv("FLANNEL_SUBNET=10.244.3.1/24\n"), null);
});
