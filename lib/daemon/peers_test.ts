import { assertEquals } from "../../tests/assert.ts";
import { IPNet } from "../base/cidr.ts";
import type { Lease } from "../store/types.ts";
import { claimOf, ownIPs } from "./peers.ts";

function lease(pub: string, pub6: string | null, mac: string, mac6?: string): Lease {
  return {
    subnet: IPNet.parse("10.244.1.0/24"),
    ipv6Subnet: pub6 ? IPNet.parse("fc00:244:0:1::/64") : null,
    attrs: {
      PublicIP: pub,
      PublicIPv6: pub6,
      BackendType: "vxlan",
      BackendData: { VNI: 1, VtepMAC: mac },
      ...(mac6 ? { BackendV6Data: { VNI: 1, VtepMAC: mac6 } } : {}),
    },
    expiration: null,
  };
}

Deno.test("claimOf: what in our own record steers traffic away from us, per family run (table)", () => {
  const ours = lease("192.0.2.1", "fc00::1", "0e:00:00:00:00:01", "0e:00:00:00:06:01");
  const v4 = { v4: true, v6: false }, dual = { v4: true, v6: true }, v6 = { v4: false, v6: true };
  const cases: [string, Lease, { v4: boolean; v6: boolean }, string | null][] = [
    ["unchanged", ours, dual, null],
    ["another PublicIP", lease("192.0.2.9", "fc00::1", "0e:00:00:00:00:01"), v4, "PublicIP 192.0.2.9"],
    ["another VtepMAC", lease("192.0.2.1", "fc00::1", "0e:00:00:00:00:09"), v4, "VtepMAC 192.0.2.1"],
    ["MAC case only", lease("192.0.2.1", "fc00::1", "0E:00:00:00:00:01"), v4, null],
    ["another PublicIPv6, IPv4 only node", lease("192.0.2.1", "fc00::9", "0e:00:00:00:00:01"), v4, null],
    [
      "another PublicIPv6, dual stack",
      lease("192.0.2.1", "fc00::9", "0e:00:00:00:00:01"),
      dual,
      "PublicIPv6 fc00::9",
    ],
    [
      "another IPv6 VtepMAC, IPv6 only",
      lease("0.0.0.0", "fc00::1", "0e:00:00:00:00:01", "0e:00:00:00:06:09"),
      v6,
      "IPv6 VtepMAC fc00::1",
    ],
    ["PublicIP 0.0.0.0 on an IPv6-only node", lease("0.0.0.0", "fc00::1", "0e:00:00:00:00:01"), v6, null],
  ];
  for (const [name, seen, fam, want] of cases) {
    const c = claimOf(seen, ours, fam);
    assertEquals(c ? `${c.what} ${c.publicIP}` : null, want, name);
  }
});

Deno.test("ownIPs: the public and interface address of the family, none empty", () => {
  const ext = { name: "eth0", index: 2, mtu: 1500, ifaceIP: "10.0.0.1", publicIP: "198.51.100.1" };
  assertEquals(ownIPs(ext, 4), ["198.51.100.1", "10.0.0.1"]);
  assertEquals(ownIPs({ ...ext, ifaceIPv6: "fc00::1", publicIPv6: null }, 6), ["fc00::1"]);
});
