/**
 * The lease keeper on etcd when etcd refuses writes for longer than the TTL: the node's permission revoked
 * (auth enabled), and the backend quota exceeded (`--quota-backend-bytes`, NOSPACE alarm). The loop keeps
 * going, reports the lease invalid after it expired, and re-acquires the same subnet once etcd accepts
 * writes again.
 */
import { assert, assertEquals } from "./assert.ts";
import { EtcdStore } from "../lib/store/etcd/etcd.ts";
import { LeaseKeeper } from "../lib/store/keeper.ts";
import { EtcdFixture } from "./store_helpers.ts";

const ATTRS = { PublicIP: "192.0.2.7", PublicIPv6: null, BackendType: "vxlan" };
const NET = JSON.stringify({ Network: "10.6.0.0/16", Backend: { Type: "vxlan" } });
const PREFIX = "/coreos.com/network";

const until = async (what: string, fn: () => boolean, ms = 30_000) => {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** Runs a keeper on `s` through an outage made by `breakIt` and ended by `fixIt`. */
async function outage(
  s: EtcdStore,
  breakIt: () => Promise<void>,
  fixIt: () => Promise<void>,
): Promise<void> {
  const l = await s.acquireLease(ATTRS);
  const ac = new AbortController();
  const validity: boolean[] = [];
  const problems: (string | null)[] = [];
  const k = new LeaseKeeper(s, l, ATTRS, {
    signal: ac.signal,
    acquireRetryMaxMs: 500,
    callTimeoutMs: 3000,
    onValidity: (v) => validity.push(v),
    onProblem: (_w, c) => problems.push(c),
  });
  const running = k.run();
  try {
    await breakIt();
    await until("the lease to expire", () => validity.includes(false));
    await new Promise((r) => setTimeout(r, 4000)); // two more TTLs of failures
    assert(!k.valid, "still no valid lease while etcd refuses writes");
    assert(problems.some((p) => p !== null), "the cause was reported");
    await fixIt();
    await until(`valid again; problems: ${JSON.stringify(problems)}`, () => k.valid);
    assert(k.lease.subnet!.equals(l.subnet!), `same subnet: ${k.lease.subnet} vs ${l.subnet}`);
    const { leases } = await s.listLeases();
    assertEquals(leases.filter((x) => x.attrs.PublicIP === ATTRS.PublicIP).length, 1);
  } finally {
    ac.abort();
    await running;
  }
}

Deno.test("lease keeper on etcd: permission revoked longer than the TTL, then restored", async () => {
  const etcd = new EtcdFixture();
  let s: EtcdStore | null = null;
  try {
    await etcd.start();
    await etcd.ctl("put", `${PREFIX}/config`, NET);
    await etcd.ctl("user", "add", "root:rootpw");
    await etcd.ctl("user", "grant-role", "root", "root");
    await etcd.ctl("role", "add", "flannel");
    await etcd.ctl("role", "grant-permission", "flannel", "--prefix=true", "readwrite", `${PREFIX}/`);
    await etcd.ctl("user", "add", "flannel:flpw");
    await etcd.ctl("user", "grant-role", "flannel", "flannel");
    await etcd.ctl("auth", "enable");
    const root = "--user=root:rootpw";
    s = new EtcdStore({
      endpoints: [etcd.url],
      prefix: PREFIX,
      ttlMs: 2000,
      username: "flannel",
      password: "flpw",
      timeoutMs: 3000,
    });
    await outage(
      s,
      () => etcd.ctl(root, "user", "revoke-role", "flannel", "flannel").then(() => {}),
      () => etcd.ctl(root, "user", "grant-role", "flannel", "flannel").then(() => {}),
    );
  } finally {
    await s?.close();
    await etcd.cleanup();
  }
});

Deno.test("lease keeper on etcd: quota exceeded longer than the TTL, then space freed", async () => {
  const etcd = new EtcdFixture(undefined, ["--quota-backend-bytes=4194304", "--auto-compaction-retention=0"]);
  let s: EtcdStore | null = null;
  try {
    await etcd.start();
    await etcd.ctl("put", `${PREFIX}/config`, NET);
    s = new EtcdStore({ endpoints: [etcd.url], prefix: PREFIX, ttlMs: 2000, timeoutMs: 3000 });
    const fill = async () => {
      const big = "x".repeat(512 * 1024);
      for (let i = 0; i < 64; i++) {
        try {
          await s!.client.txnPut(`/filler/${i}`, big, null, null);
        } catch (e) {
          if (/space exceeded|NOSPACE/i.test(String(e))) return;
          throw e;
        }
      }
      throw new Error("the quota was never reached");
    };
    const free = async () => {
      await etcd.ctl("del", "--prefix", "/filler/");
      const rev = JSON.parse(await etcd.ctl("endpoint", "status", "-w", "json"))[0].Status.header.revision;
      await etcd.ctl("compact", String(rev));
      await etcd.ctl("defrag");
      await etcd.ctl("alarm", "disarm");
    };
    await outage(s, fill, free);
  } finally {
    await s?.close();
    await etcd.cleanup();
  }
});
