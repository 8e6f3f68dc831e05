/**
 * etcd v3 store against a real etcd (Debian's /usr/bin/etcd) started by the test on free loopback ports
 * with a temp data dir, killed in `finally`.
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "./assert.ts";
import { EtcdStore } from "../lib/store/etcd/etcd.ts";
import { IPNet } from "../lib/base/cidr.ts";
import { OutOfSubnetsError } from "../lib/lease/allocator.ts";
import { LeaseNotFoundError, StoreUnavailableError } from "../lib/store/errors.ts";
import type { LeaseEvent } from "../lib/store/types.ts";
import { acquireInProcesses, EtcdFixture, leaseCli, makeTls, NET50, nextEvents } from "./store_helpers.ts";

const attrs = (ip: string) => ({
  PublicIP: ip,
  PublicIPv6: null,
  BackendType: "vxlan",
  BackendData: { VNI: 1, VtepMAC: "aa:bb:cc:dd:ee:01" },
});

let prefixN = 0;
const newPrefix = () => `/t${++prefixN}/coreos.com/network`;

Deno.test("etcd store", async (t) => {
  const etcd = new EtcdFixture();
  try {
    await etcd.start();

    await t.step(
      "a lease written by flanctl has flannel's exact key and JSON, with an etcd lease",
      async () => {
        const prefix = newPrefix();
        const s = new EtcdStore({ endpoints: [etcd.url], prefix });
        await s.setNetworkConfig(NET50);
        const l = await s.acquireLease(attrs("192.0.2.1"), { previousSubnet: IPNet.parse("10.5.52.0/24") });
        // previous subnet outside SubnetMax is not reused
        assert(l.subnet!.ip.value < IPNet.parse("10.5.51.0/24").ip.value);
        const out = await etcd.ctl("get", `${prefix}/subnets/`, "--prefix");
        assertEquals(
          out.trim().split("\n"),
          [
            `${prefix}/subnets/${l.subnet!.ip}-24`,
            `{"PublicIP":"192.0.2.1","PublicIPv6":null,"BackendType":"vxlan","BackendData":{"VNI":1,"VtepMAC":"aa:bb:cc:dd:ee:01"}}`,
          ],
        );
        // etcdctl -w json prints int64 lease IDs through a float: find ours via `lease list` instead.
        const ids = (await etcd.ctl("lease", "list")).trim().split("\n").slice(1);
        const ttls = await Promise.all(ids.map((id) => etcd.ctl("lease", "timetolive", "--keys", id)));
        const ttl = ttls.find((x) => x.includes(`${prefix}/subnets/${l.subnet!.ip}-24`));
        assert(ttl, `no etcd lease attached to the key: ${ttls.join("")}`);
        assertMatchTtl(ttl);
        assertEquals((await etcd.ctl("get", `${prefix}/config`, "--print-value-only")).trim(), NET50);
        // renewal extends the expiry
        await new Promise((r) => setTimeout(r, 1100));
        const r = await s.renewLease(l);
        assert(r.expiration!.getTime() > l.expiration!.getTime(), "renewal extends expiry");
        await s.revokeLease(l.subnet!);
        await assertRejects(() => s.renewLease(l), LeaseNotFoundError);
        await s.close();
      },
    );

    await t.step(
      "foreign leases (etcdctl put) are seen by list, watch and `lease list`; malformed ones skipped",
      async () => {
        const prefix = newPrefix();
        const warned: string[] = [];
        const s = new EtcdStore({ endpoints: [etcd.url], prefix, warn: (msg) => warned.push(msg) });
        await s.setNetworkConfig(NET50);
        const { cursor } = await s.listLeases();
        const ac = new AbortController();
        const it = s.watchLeases(cursor, ac.signal)[Symbol.asyncIterator]();
        try {
          const value = `{"PublicIP":"198.51.100.9","PublicIPv6":null,"BackendType":"vxlan",` +
            `"BackendData":{"VNI":1,"VtepMAC":"0e:00:00:00:00:09"}}`;
          await etcd.ctl("put", `${prefix}/subnets/10.5.9.0-24`, value);
          await etcd.ctl("put", `${prefix}/subnets/10.5.10.0-24`, "{garbage");
          await etcd.ctl("put", `${prefix}/subnets/not-a-subnet`, value);
          const evs: LeaseEvent[] = await nextEvents(it, (e) => e.some((x) => x.type === "added"));
          assertEquals(evs.map((e) => [e.type, String(e.lease.subnet)]), [["added", "10.5.9.0/24"]]);
          assertEquals(evs[0].lease.attrs.BackendData, { VNI: 1, VtepMAC: "0e:00:00:00:00:09" });
          const { leases } = await s.listLeases();
          assertEquals(leases.map((l) => String(l.subnet)), ["10.5.9.0/24"]);
          // The skipped entries reach the store's warn callback (the daemon's Logger), each once.
          assertEquals(warned.filter((w) => w.includes("10.5.10.0-24")).length, 1, warned.join("\n"));
          assert(warned.every((w) => w.startsWith(`etcd ${prefix}/subnets/`)), warned.join("\n"));
          const cli = await leaseCli([
            "list",
            "-o",
            "json",
            "--etcd-endpoints",
            etcd.url,
            "--etcd-prefix",
            prefix,
          ]);
          assertEquals(cli.code, 0, cli.stderr);
          assertEquals(JSON.parse(cli.stdout), [{
            subnet: "10.5.9.0/24",
            publicIP: "198.51.100.9",
            backendType: "vxlan",
            backendData: { VNI: 1, VtepMAC: "0e:00:00:00:00:09" },
            publicIPv6: null,
            backendV6Data: null,
            node: null,
            expiration: null,
          }]);
          assertStringIncludes(cli.stderr, "10.5.10.0-24");
          await etcd.ctl("del", `${prefix}/subnets/10.5.9.0-24`);
          const rm = await nextEvents(it, (e) => e.some((x) => x.type === "removed"));
          assertEquals(String(rm.find((e) => e.type === "removed")!.lease.subnet), "10.5.9.0/24");
        } finally {
          ac.abort();
          await it.return?.();
          await s.close();
        }
      },
    );

    await t.step("an expired lease produces a removal event", async () => {
      const prefix = newPrefix();
      const s = new EtcdStore({ endpoints: [etcd.url], prefix, ttlMs: 2000 });
      await s.setNetworkConfig(NET50);
      const { cursor } = await s.listLeases();
      const ac = new AbortController();
      const it = s.watchLeases(cursor, ac.signal)[Symbol.asyncIterator]();
      try {
        const l = await s.acquireLease(attrs("192.0.2.5"));
        const evs = await nextEvents(it, (e) => e.some((x) => x.type === "removed"));
        assertEquals(evs.map((e) => e.type), ["added", "removed"]);
        assertEquals(String(evs[1].lease.subnet), String(l.subnet));
      } finally {
        ac.abort();
        await it.return?.();
        await s.close();
      }
    });

    await t.step("50 processes acquire 50 distinct subnets; the 51st is out of subnets", async () => {
      const prefix = newPrefix();
      const s = new EtcdStore({ endpoints: [etcd.url], prefix });
      await s.setNetworkConfig(NET50);
      const results = await acquireInProcesses({ etcdEndpoints: etcd.url, etcdPrefix: prefix }, 50);
      assertEquals(results.filter((r) => r.error).map((r) => r.error), []);
      assertEquals(new Set(results.map((r) => r.subnet)).size, 50);
      assertEquals((await s.listLeases()).leases.length, 50, "none lost");
      const e = await assertRejects(() => s.acquireLease(attrs("203.0.113.1")), OutOfSubnetsError);
      assertStringIncludes(e.message, "out of subnets");
      await s.close();
    });

    await t.step(
      "a reservation becomes a 24 h lease on first use; dual-stack reservations are v4&v6",
      async () => {
        const prefix = newPrefix();
        const s = new EtcdStore({ endpoints: [etcd.url], prefix });
        await s.setNetworkConfig(NET50);
        await s.reserve(IPNet.parse("10.5.7.0/24"), "192.0.2.7");
        const key = `${prefix}/subnets/10.5.7.0-24`;
        const leaseOf = async () => JSON.parse(await etcd.ctl("get", key, "-w", "json")).kvs[0].lease ?? 0;
        assertEquals(await leaseOf(), 0, "a reservation has no etcd lease");
        const l = await s.acquireLease(attrs("192.0.2.7"));
        assertEquals(String(l.subnet), "10.5.7.0/24");
        assert(l.expiration !== null, "acquired: a lease with an expiry");
        assert((await leaseOf()) !== 0, "the key now has an etcd lease");
        const ids = (await etcd.ctl("lease", "list")).trim().split("\n").slice(1);
        const ttls = await Promise.all(ids.map((id) => etcd.ctl("lease", "timetolive", "--keys", id)));
        assertMatchTtl(ttls.find((x) => x.includes(key))!);
        // Dual stack: one key naming both subnets, never 0.0.0.0-0&….
        const p6 = newPrefix();
        const s6 = new EtcdStore({ endpoints: [etcd.url], prefix: p6 });
        await s6.setNetworkConfig(
          JSON.stringify({
            Network: "10.5.0.0/16",
            EnableIPv6: true,
            IPv6Network: "fc00::/48",
            Backend: { Type: "vxlan" },
          }),
        );
        await s6.reserve(IPNet.parse("10.5.9.0/24"), "192.0.2.9", {
          subnet: IPNet.parse("fc00:0:0:9::/64"),
          publicIP: "fc00::9",
        });
        const keys = (await etcd.ctl("get", `${p6}/subnets/`, "--prefix", "--keys-only")).trim();
        assertEquals(keys, `${p6}/subnets/10.5.9.0-24&fc00:0:0:9::-64`);
        await s.close();
        await s6.close();
      },
    );
  } finally {
    await etcd.cleanup();
  }
});

function assertMatchTtl(out: string) {
  const m = /remaining\((\d+)s\)/.exec(out);
  assert(m && Number(m[1]) > 86_000 && Number(m[1]) <= 86_400, `24 h etcd lease: ${out}`);
}

Deno.test("etcd store: etcd killed gives clear errors and retries; recovers when it returns", async () => {
  const etcd = new EtcdFixture();
  const warned: string[] = [];
  const s = new EtcdStore({
    endpoints: [etcd.url],
    prefix: "/coreos.com/network",
    timeoutMs: 2000,
    warn: (msg) => warned.push(msg),
  });
  const ac = new AbortController();
  let it: AsyncIterator<LeaseEvent[]> | null = null;
  try {
    await etcd.start();
    await s.setNetworkConfig(NET50);
    const { cursor } = await s.listLeases();
    it = s.watchLeases(cursor, ac.signal)[Symbol.asyncIterator]();
    const first = it.next(); // start watching
    await s.acquireLease(attrs("192.0.2.1"));
    const got = await first;
    assertEquals(got.value?.[0]?.type, "added");
    await etcd.kill();
    const e = await assertRejects(() => s.acquireLease(attrs("192.0.2.2")), StoreUnavailableError);
    assertStringIncludes(e.message, "etcd unreachable");
    await etcd.start();
    const l = await s.acquireLease(attrs("192.0.2.2"));
    const evs = await nextEvents(it, (x) => x.some((ev) => ev.type === "added"), 30_000);
    assert(evs.some((ev) => String(ev.lease.subnet) === String(l.subnet)), "watch recovered");
    // (that event may come from the re-list; the next one comes through the watch stream again)
    const l3 = await s.acquireLease(attrs("192.0.2.3"));
    await nextEvents(it, (x) => x.some((ev) => String(ev.lease.subnet) === String(l3.subnet)), 30_000);
    // The failure and the recovery went to the warn callback (the daemon's Logger), not to stderr.
    const log = warned.join("\n");
    assert(warned.some((w) => /^etcd watch on .* failed \(.*\); retrying in [\d.]+s$/.test(w)), log);
    assert(warned.some((w) => /^etcd watch on .* resumed at revision \d+$/.test(w)), log);
  } finally {
    ac.abort();
    await it?.return?.();
    await s.close();
    await etcd.cleanup();
  }
});

Deno.test("etcd store: TLS with a CA and client certificates", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-tls-" });
  const tls = await makeTls(dir);
  const etcd = new EtcdFixture(tls);
  try {
    await etcd.start();
    const noCert = new EtcdStore({ endpoints: [etcd.url], prefix: "/p", caFile: tls.ca, timeoutMs: 3000 });
    await assertRejects(() => noCert.listLeases(), StoreUnavailableError, "etcd unreachable");
    await noCert.close();
    const s = new EtcdStore({
      endpoints: [etcd.url],
      prefix: "/p",
      caFile: tls.ca,
      certFile: tls.clientCert,
      keyFile: tls.clientKey,
    });
    await s.setNetworkConfig(NET50);
    const l = await s.acquireLease(attrs("192.0.2.1"));
    assertEquals((await s.listLeases()).leases.map((x) => String(x.subnet)), [String(l.subnet)]);
    await s.close();
  } finally {
    await etcd.cleanup();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("etcd store: username/password authentication", async () => {
  const etcd = new EtcdFixture();
  try {
    await etcd.start();
    await etcd.ctl("user", "add", "root:pw");
    await etcd.ctl("role", "add", "root");
    await etcd.ctl("user", "grant-role", "root", "root");
    await etcd.ctl("auth", "enable");
    const bad = new EtcdStore({ endpoints: [etcd.url], prefix: "/p", username: "root", password: "nope" });
    await assertRejects(() => bad.listLeases(), Error, "check --etcd-username/--etcd-password");
    await bad.close();
    const good = new EtcdStore({ endpoints: [etcd.url], prefix: "/p", username: "root", password: "pw" });
    await good.setNetworkConfig(NET50);
    const l = await good.acquireLease(attrs("192.0.2.1"));
    assertEquals((await good.listLeases()).leases.map((x) => String(x.subnet)), [String(l.subnet)]);
    await good.close();
  } finally {
    await etcd.cleanup();
  }
});
