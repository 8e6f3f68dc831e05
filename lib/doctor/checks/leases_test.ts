import { assertEquals } from "../../../tests/assert.ts";
import { parseClaims } from "./leases.ts";

Deno.test("parseClaims: the daemon's claim series; none from an older daemon; a garbled claimant is not shown", () => {
  const body = [
    "flanctl_own_subnet_claims_total 3",
    "flanctl_own_lease_rewrites_total 2",
    'flanctl_own_subnet_last_claim_timestamp_seconds{public_ip="10.94.0.177"} 1796420494.5',
    "",
  ].join("\n");
  assertEquals(parseClaims(body), {
    claims: 3,
    rewrites: 2,
    last: { publicIP: "10.94.0.177", at: new Date(1796420494500) },
  });
  assertEquals(parseClaims("flanctl_peers 2\n"), null);
  assertEquals(
    parseClaims(
      'flanctl_own_subnet_claims_total 1\nflanctl_own_subnet_last_claim_timestamp_seconds{public_ip="1.2.3"} 5\n',
    )
      ?.last,
    null,
  );
});
