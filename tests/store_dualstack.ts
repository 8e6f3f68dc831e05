/**
 * The dual-stack and IPv6-only checks every store passes (lib/store/file/file_dualstack_test.ts,
 * tests/store_dualstack_test.ts for etcd): both families allocated together, the key and value bytes exactly
 * as flanneld writes them, foreign flanneld-written v6 entries read back, malformed v6 entries skipped, and an
 * overlapping v6 reservation refused.
 * @module
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "./assert.ts";
import { ParseError } from "../lib/base/errors.ts";
import { IPNet } from "../lib/base/cidr.ts";
import { SubnetConflictError } from "../lib/store/errors.ts";
import type { LeaseAttrsWire, SubnetStore } from "../lib/store/types.ts";

const DUAL = JSON.stringify({
  Network: "10.244.0.0/16",
  EnableIPv6: true,
  IPv6Network: "fc00::/48",
  Backend: { Type: "vxlan" },
});
const V6ONLY = JSON.stringify({
  EnableIPv4: false,
  EnableIPv6: true,
  IPv6Network: "fc00::/48",
  Backend: { Type: "vxlan" },
});

const dualAttrs = (n: number): LeaseAttrsWire => ({
  PublicIP: `192.0.2.${n}`,
  PublicIPv6: `fc00:99::${n}`,
  BackendType: "vxlan",
  BackendData: { VNI: 1, VtepMAC: `0e:aa:00:00:00:0${n}` },
  BackendV6Data: { VNI: 1, VtepMAC: `0e:bb:00:00:00:0${n}` },
});
const v6Attrs = (n: number): LeaseAttrsWire => ({
  PublicIP: "0.0.0.0",
  PublicIPv6: `fc00:99::${n}`,
  BackendType: "vxlan",
  BackendV6Data: { VNI: 1, VtepMAC: `0e:bb:00:00:00:0${n}` },
});

/** flanneld's value of a dual-stack vxlan node (Go json.Marshal of LeaseAttrs, field order kept). */
const FLANNELD_DUAL =
  `{"PublicIP":"192.0.2.9","PublicIPv6":"fc00:99::9","BackendType":"vxlan","BackendData":{"VNI":1,"VtepMAC":"0e:00:00:00:00:09"},"BackendV6Data":{"VNI":1,"VtepMAC":"0e:00:00:00:06:09"}}`;

/** Shared checks; `raw(key)` reads the stored value bytes of a key, `put(key, value)` writes a foreign one. */
export async function exercise(
  s: SubnetStore,
  raw: (key: string) => Promise<string>,
  put: (key: string, value: string) => Promise<void>,
) {
  await s.setNetworkConfig(DUAL);
  const a = await s.acquireLease(dualAttrs(1));
  const b = await s.acquireLease(dualAttrs(2));
  assert(a.subnet && a.ipv6Subnet && b.subnet && b.ipv6Subnet, "both families allocated together");
  assertEquals([a.subnet.prefix, a.ipv6Subnet.prefix], [24, 64]);
  assert(!a.subnet.equals(b.subnet) && !a.ipv6Subnet.equals(b.ipv6Subnet), "distinct in both families");
  const keyA = `${a.subnet.toKey()}&${a.ipv6Subnet.toKey()}`;
  assertEquals(
    await raw(keyA),
    `{"PublicIP":"192.0.2.1","PublicIPv6":"fc00:99::1","BackendType":"vxlan",` +
      `"BackendData":{"VNI":1,"VtepMAC":"0e:aa:00:00:00:01"},"BackendV6Data":{"VNI":1,"VtepMAC":"0e:bb:00:00:00:01"}}`,
  );
  // Re-acquire by our public addresses returns the same pair; the previous subnet.env pair is honoured.
  const again = await s.acquireLease(dualAttrs(1));
  assertEquals([String(again.subnet), String(again.ipv6Subnet)], [String(a.subnet), String(a.ipv6Subnet)]);
  // The previous pair must be free: a and b were allocated at random and may hold 10.244.77.0/24 (or its
  // v6 twin), in which case flanneld too allocates another subnet.
  const taken = [a, b].flatMap((l) => [String(l.subnet), String(l.ipv6Subnet)]);
  const prev = [77, 78, 79].map((n) => [`10.244.${n}.0/24`, `fc00:0:0:${n}::/64`])
    .find(([v4, v6]) => !taken.includes(v4) && !taken.includes(v6))!;
  const c = await s.acquireLease(dualAttrs(3), {
    previousSubnet: IPNet.parse(prev[0]),
    previousIPv6Subnet: IPNet.parse(prev[1]),
  });
  assertEquals([String(c.subnet), String(c.ipv6Subnet)], prev);
  // A foreign lease written by flanneld, and malformed v6 entries (skipped with a warning), at subnets
  // none of a, b, c drew (they are random: a foreign key equal to one of theirs would overwrite it).
  const held = [a, b, c].flatMap((l) => [String(l.subnet), String(l.ipv6Subnet)]);
  const n = [9, 20, 30, 40, 50, 60].find((k) =>
    [k, k + 1, k + 2].every((m) => !held.includes(`10.244.${m}.0/24`) && !held.includes(`fc00:0:0:${m}::/64`))
  )!;
  const v6n = `fc00:0:0:${n}::/64`;
  await put(`10.244.${n}.0-24&fc00:0:0:${n}::-64`, FLANNELD_DUAL);
  await put(
    `10.244.${n + 1}.0-24&fc00:0:0:${n + 1}::-64`,
    FLANNELD_DUAL.replace(`"fc00:99::9"`, `"not-an-ip"`),
  );
  await put(`10.244.${n + 2}.0-24&FC00:0:0:${n + 2}::-64`, FLANNELD_DUAL);
  const { leases } = await s.listLeases();
  const f = leases.find((l) => l.attrs.PublicIP === "192.0.2.9")!;
  assertEquals([String(f.subnet), String(f.ipv6Subnet), f.attrs.PublicIPv6], [
    `10.244.${n}.0/24`,
    v6n,
    "fc00:99::9",
  ]);
  assertEquals(f.attrs.BackendV6Data, { VNI: 1, VtepMAC: "0e:00:00:00:06:09" });
  assertEquals(leases.length, 4, leases.map((l) => `${l.subnet}&${l.ipv6Subnet}`).join(" "));
  // A dual-stack reservation whose v6 half overlaps another node's v6 subnet is refused, naming the lease.
  const used = new Set(leases.map((l) => String(l.subnet)));
  const free4 = IPNet.parse(
    [...Array(100).keys()].map((i) => `10.244.${150 + i}.0/24`).find((x) => !used.has(x))!,
  );
  const e = await assertRejects(
    () => s.reserve(free4, "192.0.2.7", { subnet: IPNet.parse(v6n), publicIP: "fc00:99::7" }),
    SubnetConflictError,
  );
  assert(e.message.includes(v6n) && e.message.includes("overlaps"), e.message);
  // One family alone is refused in a dual-stack network, by the store itself (not only by the CLI): flanneld
  // reads an IPv6-only key 0.0.0.0-0&… as 0.0.0.0/0, and its nodes then run out of subnets.
  const used6 = new Set(leases.map((l) => String(l.ipv6Subnet)));
  const free6 = IPNet.parse(
    [...Array(100).keys()].map((i) => `fc00:0:0:${(0xf00 + i).toString(16)}::/64`).find((x) =>
      !used6.has(x)
    )!,
  );
  const before = (await s.listLeases()).leases.length;
  for (
    const one of [
      () => s.reserve(free6, "fc00:99::7"),
      () => s.reserve(free4, "192.0.2.7"),
    ]
  ) {
    const err = await assertRejects(one, ParseError);
    assertStringIncludes(err.message, "needs both families");
  }
  assertEquals((await s.listLeases()).leases.length, before, "nothing written");
  // The allocator never hands out the v6 subnet the foreign lease holds.
  for (let i = 4; i <= 8; i++) {
    const l = await s.acquireLease(dualAttrs(i));
    assert(
      !l.ipv6Subnet!.equals(IPNet.parse(v6n)) && !l.subnet!.equals(IPNet.parse(`10.244.${n}.0/24`)),
    );
  }
}

export async function exerciseV6Only(s: SubnetStore, raw: (key: string) => Promise<string>) {
  await s.setNetworkConfig(V6ONLY);
  const a = await s.acquireLease(v6Attrs(1));
  assertEquals(a.subnet, null);
  assert(a.ipv6Subnet && a.ipv6Subnet.prefix === 64);
  assertEquals(
    await raw(`0.0.0.0-0&${a.ipv6Subnet.toKey()}`),
    `{"PublicIP":"0.0.0.0","PublicIPv6":"fc00:99::1","BackendType":"vxlan","BackendV6Data":{"VNI":1,"VtepMAC":"0e:bb:00:00:00:01"}}`,
  );
  const again = await s.acquireLease(v6Attrs(1));
  assertEquals(String(again.ipv6Subnet), String(a.ipv6Subnet));
  const b = await s.acquireLease(v6Attrs(2));
  assert(!b.ipv6Subnet!.equals(a.ipv6Subnet), "a second node gets another subnet");
  const r = await s.renewLease(b);
  assertEquals(String(r.ipv6Subnet), String(b.ipv6Subnet));
  await s.revokeLease(b.ipv6Subnet!);
  assertEquals((await s.listLeases()).leases.map((l) => String(l.ipv6Subnet)), [String(a.ipv6Subnet)]);
}
