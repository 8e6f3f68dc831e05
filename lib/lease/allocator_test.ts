/** The shared allocator: acquire order, range limits, dual stack, out of subnets. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { IPNet } from "../base/cidr.ts";
import { parseNetConfig } from "../config/netconf.ts";
import { allocate, OutOfSubnetsError } from "./allocator.ts";
import type { Lease } from "../store/types.ts";

const cfg = parseNetConfig(JSON.stringify({
  Network: "10.5.0.0/16",
  SubnetMin: "10.5.1.0",
  SubnetMax: "10.5.4.0",
  Backend: { Type: "vxlan" },
}));
const lease = (s: string, ip: string): Lease => ({
  subnet: IPNet.parse(s),
  ipv6Subnet: null,
  attrs: { PublicIP: ip, PublicIPv6: null, BackendType: "vxlan" },
  expiration: null,
});
const me = { PublicIP: "192.0.2.1", PublicIPv6: null, BackendType: "vxlan" };

Deno.test("allocator: own lease first, then previous subnet, then random free in range", () => {
  const leases = [lease("10.5.2.0/24", "192.0.2.9"), lease("10.5.3.0/24", "192.0.2.1")];
  const a = allocate(cfg, leases, me, { previousSubnet: IPNet.parse("10.5.4.0/24") });
  assertEquals([a.kind, a.kind === "existing" && String(a.lease.subnet)], ["existing", "10.5.3.0/24"]);
  const b = allocate(cfg, leases.slice(0, 1), me, { previousSubnet: IPNet.parse("10.5.4.0/24") });
  assertEquals(b.kind === "new" && String(b.subnet), "10.5.4.0/24");
  // previous subnet taken or out of range → random among free ones; random(n) picks index
  const c = allocate(
    cfg,
    leases.slice(0, 1),
    me,
    { previousSubnet: IPNet.parse("10.5.2.0/24") },
    (n) => n - 1,
  );
  assertEquals(c.kind === "new" && String(c.subnet), "10.5.4.0/24");
  const d = allocate(cfg, leases.slice(0, 1), me, { previousSubnet: IPNet.parse("10.5.9.0/24") }, () => 0);
  assertEquals(d.kind === "new" && String(d.subnet), "10.5.1.0/24");
  // own lease outside the (new) range is stale and a new one is chosen
  const e = allocate(cfg, [lease("10.5.200.0/24", "192.0.2.1")], me, {}, () => 0);
  assertEquals([e.kind, e.stale.length], ["new", 1]);
});

Deno.test("allocator: out of subnets, dual stack in lockstep", () => {
  const full = ["10.5.1.0/24", "10.5.2.0/24", "10.5.3.0/24", "10.5.4.0/24"].map((s, i) =>
    lease(s, `192.0.2.${20 + i}`)
  );
  assertThrows(() => allocate(cfg, full, me), OutOfSubnetsError, "out of subnets");
  const dual = parseNetConfig(JSON.stringify({
    Network: "10.5.0.0/16",
    EnableIPv6: true,
    IPv6Network: "fc00::/48",
    Backend: { Type: "vxlan" },
  }));
  const a = allocate(dual, [], { ...me, PublicIPv6: "fc00::1" }, {}, () => 2);
  assertEquals(a.kind === "new" && [String(a.subnet), String(a.ipv6Subnet)], [
    "10.5.3.0/24",
    "fc00:0:0:3::/64",
  ]);
});

Deno.test("allocator: candidates overlapping a lease or reservation of another size are skipped", () => {
  const c25 = parseNetConfig(JSON.stringify({
    Network: "10.5.0.0/16",
    SubnetLen: 25,
    SubnetMin: "10.5.0.0",
    SubnetMax: "10.5.2.0",
    Backend: { Type: "vxlan" },
  }));
  // An existing /23 (10.5.0.0-10.5.1.255) and a /26 reservation inside 10.5.2.0/25.
  const leases = [lease("10.5.0.0/23", "192.0.2.9"), lease("10.5.2.0/26", "192.0.2.8")];
  const seen = new Set<string>();
  for (let i = 0; i < 8; i++) {
    try {
      const a = allocate(c25, leases, me, {}, (n) => Math.min(i, n - 1));
      if (a.kind === "new") seen.add(String(a.subnet));
    } catch (e) {
      assertEquals(e instanceof OutOfSubnetsError, true);
    }
  }
  // 10.5.0.0 … 10.5.1.128 lie inside the /23, 10.5.2.0/25 contains the /26: none of them may be chosen.
  assertEquals([...seen], []);
  assertThrows(() => allocate(c25, leases, me), OutOfSubnetsError);
  // The previous subnet is not reused either when it overlaps someone's lease.
  const wide = parseNetConfig(
    JSON.stringify({ Network: "10.5.0.0/16", SubnetLen: 25, Backend: { Type: "vxlan" } }),
  );
  const p = allocate(wide, leases, me, { previousSubnet: IPNet.parse("10.5.1.0/25") }, () => 0);
  assertEquals(p.kind === "new" && String(p.subnet), "10.5.2.128/25");
});
