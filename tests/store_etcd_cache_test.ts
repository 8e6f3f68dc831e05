/**
 * The etcd store's acquire list cache: after the first acquire, acquires do not list every lease (the list
 * is kept current by a watch), and leases other nodes write in between are still never handed out twice.
 */
import { assert, assertEquals } from "./assert.ts";
import { EtcdFixture } from "./store_helpers.ts";
import { EtcdStore } from "../lib/store/etcd/etcd.ts";
import type { LeaseAttrsWire } from "../lib/store/types.ts";

const NETCONF = JSON.stringify({ Network: "10.0.0.0/16", SubnetLen: 24, Backend: { Type: "vxlan" } });

const attrs = (i: number): LeaseAttrsWire => ({
  PublicIP: `172.16.0.${i}`,
  PublicIPv6: null,
  BackendType: "vxlan",
  BackendData: { VNI: 1, VtepMAC: "0e:00:00:00:00:01" },
});

Deno.test("etcd store: acquires after the first do not list every lease; other nodes' leases are never handed out again", async () => {
  const etcd = new EtcdFixture();
  const prefix = "/cachetest/coreos.com/network";
  const a = new EtcdStore({ endpoints: [etcd.url], prefix });
  const b = new EtcdStore({ endpoints: [etcd.url], prefix });
  try {
    await etcd.start();
    await a.setNetworkConfig(NETCONF);
    // Count the range requests over the whole subnets prefix that store `a` makes.
    let lists = 0;
    const range = a.client.range.bind(a.client);
    a.client.range = (key: string, end?: string) => {
      if (end && key.endsWith("/subnets/")) lists++;
      return range(key, end);
    };
    const got = new Set<string>();
    for (let i = 1; i <= 60; i++) {
      const l = await (i % 2 ? a : b).acquireLease(attrs(i));
      const s = String(l.subnet);
      assert(!got.has(s), `subnet ${s} handed out twice`);
      got.add(s);
    }
    // 30 acquires by `a`: one list to start with, and at most the few a lost race (b's writes not yet seen
    // through the watch) forces.
    assert(lists >= 1 && lists <= 5, `a listed ${lists} times for 30 acquires`);
    // Its own earlier lease is found again (existing), not a new subnet.
    const again = await a.acquireLease(attrs(1));
    assert(got.has(String(again.subnet)));
    assertEquals((await b.listLeases()).leases.length, 60);
  } finally {
    await a.close();
    await b.close();
    await etcd.cleanup();
  }
});
