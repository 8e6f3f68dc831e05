/**
 * Helper of bench/daemon_bench.ts (not a bench itself): run inside the underlay namespace, writes `n`
 * fake vxlan leases (subnets from index `from`, flannel's key schema under /coreos.com/network) into the
 * etcd at `url`, 100 at a time, all on one 24 h etcd lease.
 *
 *   deno run -A bench/etcd_fill.ts URL FROM N
 * @module
 */
import { EtcdClient } from "../lib/store/etcd/etcd_client.ts";
import { encodeLeaseAttrs } from "../lib/lease/wire.ts";
import { randomLocalMac } from "../lib/backend/vtep_mac.ts";

const [url, fromArg, nArg] = Deno.args;
const from = Number(fromArg), n = Number(nArg);
const c = new EtcdClient({ endpoints: [url] });
try {
  const lease = await c.grant(86400);
  for (let i = from; i < from + n; i += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, from + n - i) }, (_, j) => {
        const k = i + j;
        const attrs = {
          PublicIP: `172.30.${(k >> 8) & 255}.${k & 255}`,
          PublicIPv6: null,
          BackendType: "vxlan",
          BackendData: { VNI: 1, VtepMAC: randomLocalMac() },
        };
        const key = `/coreos.com/network/subnets/10.${(k >> 8) & 255}.${k & 255}.0-24`;
        return c.txnPut(key, encodeLeaseAttrs(attrs), lease, null);
      }),
    );
  }
} finally {
  c.close();
}
