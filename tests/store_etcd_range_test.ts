/**
 * The etcd client reads a prefix RANGE_PAGE keys per request (the daemon's initial list of thousands of
 * leases is not one huge response): every key comes back exactly once, in key order, at one revision, also
 * when the prefix holds several pages and keys that are prefixes of others.
 */
import { assert, assertEquals } from "./assert.ts";
import { EtcdFixture } from "./store_helpers.ts";
import { EtcdClient, prefixEnd, RANGE_PAGE } from "../lib/store/etcd/etcd_client.ts";

Deno.test("etcd client: a range over more than a page returns every key once, in order, at one revision", async () => {
  const etcd = new EtcdFixture();
  const c = new EtcdClient({ endpoints: [etcd.url] });
  try {
    await etcd.start();
    const prefix = "/rangetest/subnets/";
    const n = 2 * RANGE_PAGE + 7;
    // Keys "k0000" … plus "k0000x" (a key that extends another: the page boundary must not skip or repeat it).
    const keys = Array.from({ length: n }, (_, i) => `${prefix}k${String(i).padStart(4, "0")}`);
    keys.push(`${prefix}k${String(RANGE_PAGE - 1).padStart(4, "0")}x`);
    for (let i = 0; i < keys.length; i += 100) {
      await Promise.all(keys.slice(i, i + 100).map((k) => c.txnPut(k, `v-${k}`, null, null)));
    }
    await c.txnPut("/rangetest/subnets0", "outside the prefix", null, null);
    const { kvs, revision } = await c.range(prefix, prefixEnd(prefix));
    assertEquals(kvs.map((k) => k.key), [...keys].sort());
    assert(kvs.every((k) => k.value === `v-${k.key}`), "values match their keys");
    assert(revision >= Math.max(...kvs.map((k) => k.modRevision)), `revision ${revision} covers every key`);
    // A single key (no range end) is one request, as before.
    assertEquals((await c.range(keys[3])).kvs.map((k) => k.value), [`v-${keys[3]}`]);
  } finally {
    c.close();
    await etcd.cleanup();
  }
});
