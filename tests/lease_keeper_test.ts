/** The lease keeper renews before expiry on the file store and reports a revoked lease. */
import { assert, assertEquals, assertRejects } from "./assert.ts";
import { FileStore } from "../lib/store/file.ts";
import { keepLease, renewDelayMs } from "../lib/store/keeper.ts";
import { LeaseNotFoundError } from "../lib/store/errors.ts";

Deno.test("lease keeper: renews before expiry; a revoked lease is reported", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-keep-" });
  const s = new FileStore({ dir, ttlMs: 1200 });
  const ac = new AbortController();
  try {
    await s.setNetworkConfig(JSON.stringify({ Network: "10.5.0.0/16", Backend: { Type: "vxlan" } }));
    const l = await s.acquireLease({ PublicIP: "192.0.2.1", PublicIPv6: null, BackendType: "vxlan" });
    assertEquals(renewDelayMs({ ...l, expiration: null }), Infinity);
    const renewed: number[] = [];
    const keeping = keepLease(s, l, {
      signal: ac.signal,
      renewMarginMs: 800,
      onRenewed: (x) => renewed.push(x.expiration!.getTime()),
    });
    const deadline = Date.now() + 10_000;
    while (renewed.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert(renewed.length >= 3, "renewed repeatedly");
    assert(renewed[2] > l.expiration!.getTime(), "expiry moved forward");
    // lease outlived its original 1.2 s TTL
    await new Promise((r) => setTimeout(r, 1300));
    assertEquals((await s.listLeases()).leases.length, 1);
    await s.revokeLease(l.subnet!);
    await assertRejects(() => keeping, LeaseNotFoundError);
  } finally {
    ac.abort();
    await s.close();
    await Deno.remove(dir, { recursive: true });
  }
});
