import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { IPAddr } from "../base/cidr.ts";
import {
  allocate,
  canonicalizeRange,
  gc,
  loadConf,
  rangeIter,
  release,
  validAttachments,
} from "./host_local.ts";
import { CniError } from "./spec.ts";

Deno.test("host-local ranges: defaults and checks as the reference", () => {
  const r = canonicalizeRange({ subnet: "10.1.2.0/24" }, "r");
  assertEquals([r.rangeStart, r.rangeEnd, r.gateway].map(String), ["10.1.2.1", "10.1.2.254", "10.1.2.1"]);
  const v6 = canonicalizeRange({ subnet: "fd00::/120" }, "r");
  assertEquals(String(v6.rangeEnd), "fd00::ff");
  assertThrows(() => canonicalizeRange({ subnet: "10.1.2.0/31" }, "r"), CniError, "too small");
  assertThrows(() => canonicalizeRange({ subnet: "10.1.2.3/24" }, "r"), CniError, "host bits");
  assertThrows(
    () => canonicalizeRange({ subnet: "10.1.2.0/24", rangeStart: "10.1.3.1" }, "r"),
    CniError,
    "RangeStart",
  );
});

Deno.test("host-local ranges: a gateway outside the subnet is refused, as the reference v1.10", () => {
  // Found by host_local_prop_test.ts ({"subnet":"10.183.224.0/19","gateway":"fc00::"} was taken and put
  // in the result); the reference plugins' host-local v1.10.0 answers "gateway fc00:: not in network".
  for (const gateway of ["fc00::", "10.1.1.1", "10.183.192.1"]) {
    assertThrows(
      () => canonicalizeRange({ subnet: "10.183.224.0/19", gateway }, "r"),
      CniError,
      `gateway ${gateway} not in network 10.183.224.0/19`,
    );
  }
  assertEquals(
    String(canonicalizeRange({ subnet: "10.183.224.0/19", gateway: "10.183.255.254" }, "r").gateway),
    "10.183.255.254",
  );
});

Deno.test("host-local round robin: after last reserved, wraps, skips the gateway, one lap", () => {
  const set = [canonicalizeRange({ subnet: "10.0.0.0/29" }, "r")]; // .1 gw, .2-.6 usable
  const lap = (last: string | null) =>
    [...rangeIter(set, last ? IPAddr.parse(last) : null)].map(([ip]) => String(ip));
  assertEquals(lap(null), ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]);
  assertEquals(lap("10.0.0.4"), ["10.0.0.5", "10.0.0.6", "10.0.0.2", "10.0.0.3", "10.0.0.4"]);
  assertEquals(lap("192.168.0.1"), lap(null)); // not in the set: start over
  const two = [
    canonicalizeRange({ subnet: "10.0.0.0/30" }, "a"),
    canonicalizeRange({ subnet: "10.0.1.0/30" }, "b"),
  ];
  assertEquals([...rangeIter(two, IPAddr.parse("10.0.0.2"))].map(([ip]) => String(ip)), [
    "10.0.1.2",
    "10.0.0.2",
  ]);
});

Deno.test("host-local config: requested IPs from CNI_ARGS, args and runtimeConfig; legacy subnet", () => {
  const c = loadConf(
    {
      name: "n",
      ipam: { subnet: "10.0.0.0/24", routes: [{ dst: "0.0.0.0/0", gw: "10.0.0.1" }] },
      args: { cni: { ips: ["10.0.0.7"] } },
      runtimeConfig: { ips: ["10.0.0.8/24"] },
    },
    "1.0.0",
    "IgnoreUnknown=1;IP=10.0.0.6;K8S_POD_NAME=x",
  );
  assertEquals(c.requested.map(String), ["10.0.0.6", "10.0.0.7", "10.0.0.8"]);
  assertEquals(c.rangeSets.length, 1);
  assertEquals(c.routes, [{ dst: "0.0.0.0/0", gw: "10.0.0.1" }]);
  assertEquals(c.dataDir, "/var/lib/cni/networks");
});

Deno.test("host-local store: reference file format, index, release, GC", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const conf = loadConf(
      { name: "n", ipam: { dataDir: dir, ranges: [[{ subnet: "10.5.0.0/29" }]] } },
      "1.0.0",
      "",
    );
    const a = await allocate(conf, { containerId: "c1", ifname: "eth0" });
    assertEquals(a.ips, [{ address: "10.5.0.2/29", gateway: "10.5.0.1" }]);
    assertEquals(Deno.readTextFileSync(`${dir}/n/10.5.0.2`), "c1\r\neth0");
    assertEquals(Deno.statSync(`${dir}/n/10.5.0.2`).mode! & 0o777, 0o600);
    assertEquals(Deno.readTextFileSync(`${dir}/n/last_reserved_ip.0`), "10.5.0.2");
    await allocate(conf, { containerId: "c2", ifname: "eth0" });
    await allocate(conf, { containerId: "c3", ifname: "net1" });
    const dup = await allocate(conf, { containerId: "c1", ifname: "eth0" }).catch((e) => e);
    assertEquals((dup as CniError).code, 101);
    assertEquals(await release(conf, { containerId: "c2", ifname: "eth0" }), ["10.5.0.3"]);
    assertEquals(await release(conf, { containerId: "c2", ifname: "eth0" }), []); // idempotent
    // An allocation without our index (as the reference leaves it) is found by the fallback scan.
    Deno.writeTextFileSync(`${dir}/n/10.5.0.6`, "ref1\r\neth0");
    assertEquals(await release(conf, { containerId: "ref1", ifname: "eth0" }), ["10.5.0.6"]);
    assertEquals(await gc(conf, [{ containerId: "c1", ifname: "eth0" }]), ["10.5.0.4"]);
    assertEquals(validAttachments({ "cni.dev/attachments": [{ containerID: "a", ifname: "b" }] }), [{
      containerId: "a",
      ifname: "b",
    }]);
    assertEquals(validAttachments({}), null);
    assertEquals(validAttachments({ "cni.dev/valid-attachments": null }), null);
    assertEquals([...Deno.readDirSync(`${dir}/.flanctl-byid/n`)].map((e) => e.name), ["c1:eth0"]);
    // Exhaustion: .3-.6 free again, take them all, then fail.
    for (const id of ["d1", "d2", "d3", "d4"]) await allocate(conf, { containerId: id, ifname: "eth0" });
    const full = await allocate(conf, { containerId: "d5", ifname: "eth0" }).catch((e) => e);
    assertEquals((full as CniError).code, 100);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
