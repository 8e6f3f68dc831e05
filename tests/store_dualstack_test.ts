/**
 * Dual-stack and IPv6-only leases in the etcd store, checked as every store is (tests/store_dualstack.ts:
 * both families allocated together, the key and value bytes exactly as flanneld writes them, foreign
 * flanneld-written v6 entries read back, malformed v6 entries skipped, and an overlapping v6 reservation
 * refused). etcd is started by the test (loopback); the file store's run: lib/store/file/file_dualstack_test.ts.
 */
import { EtcdStore } from "../lib/store/etcd/etcd.ts";
import { EtcdFixture } from "./store_helpers.ts";
import { exercise, exerciseV6Only } from "./store_dualstack.ts";

Deno.test("etcd store: dual-stack and IPv6-only leases as flanneld writes them", async () => {
  const etcd = new EtcdFixture();
  try {
    await etcd.start();
    for (const [i, v6only] of [[1, false], [2, true]] as const) {
      const prefix = `/d6t${i}/coreos.com/network`;
      const s = new EtcdStore({ endpoints: [etcd.url], prefix });
      const raw = async (key: string) =>
        (await etcd.ctl("get", `${prefix}/subnets/${key}`, "--print-value-only")).trim();
      try {
        if (v6only) await exerciseV6Only(s, raw);
        else {
          await exercise(s, raw, async (key, value) => {
            await etcd.ctl("put", `${prefix}/subnets/${key}`, value);
          });
        }
      } finally {
        await s.close();
      }
    }
  } finally {
    await etcd.cleanup();
  }
});
