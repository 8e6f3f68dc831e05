/**
 * A store that refuses writes for longer than the lease TTL never loses the lease for good. File store:
 * its tmp/ directory made immutable (`chattr +i`, EPERM on every write) for several TTLs. While no valid
 * lease is held /readyz is 503 and flanctl_ready 0; the node keeps its VXLAN device and subnet.env; once
 * writes work again each node re-acquires its own subnet and is ready again.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, waitFor } from "./daemon_fixture.ts";
import { nsRun, run } from "./netns.ts";

const TTL = "3";

needsRoot.test("daemon lease outage (file store, chattr +i): not ready while expired, same subnet after", async () => {
  const c = new DaemonCluster("10.96");
  let immutable = "";
  try {
    await c.init(JSON.stringify({ Network: "10.248.0.0/16", Backend: { Type: "vxlan" } }));
    const a = await c.addNode(0), b = await c.addNode(0);
    const flags = ["--resync-interval", "1", "--lease-ttl", TTL];
    c.start(a, flags);
    c.start(b, flags);
    await c.waitReady(a);
    await c.waitReady(b);
    const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
    const envA = await Deno.readTextFile(a.subnetFile);

    immutable = `${c.storeDir}/tmp`;
    const r = await run(["chattr", "+i", immutable]);
    assertEquals(r.code, 0, r.stderr);
    await waitFor(
      () => `A not ready after its lease expired; log:\n${a.log.slice(-15).join("\n")}`,
      async () => {
        const [code, body] = await c.http(a, "/readyz");
        return code === 503 && body.includes("lease");
      },
    );
    const [, m] = await c.http(a, "/metrics");
    assertStringIncludes(m, "\nflanctl_ready 0\n");
    // Several TTLs without a writable store: the loop keeps trying (and logs the cause once per change).
    await new Promise((res) => setTimeout(res, 3 * Number(TTL) * 1000));
    assertEquals((await c.http(a, "/readyz"))[0], 503);
    const failures = a.log.filter((l) => l.includes("re-acquiring the lease failed"));
    assert(
      failures.length >= 1 && failures.length <= 2,
      `cause logged once per change:\n${failures.join("\n")}`,
    );
    // The node keeps its kernel state and its subnet.env.
    assertEquals(await Deno.readTextFile(a.subnetFile), envA);
    const addr = (await nsRun(a.ns, ["ip", "-4", "-o", "addr", "show", "dev", "flannel.1"])).stdout;
    assertStringIncludes(addr, subA.split("/")[0], "flannel.1 keeps its address");

    await run(["chattr", "-i", immutable]);
    immutable = "";
    await c.waitReady(a, 30_000);
    await c.waitReady(b, 30_000);
    assertEquals(await c.subnetOf(a), subA, "A re-acquired its own subnet");
    assertEquals(await c.subnetOf(b), subB, "B re-acquired its own subnet");
    const lease = JSON.parse(
      await Deno.readTextFile(`${c.storeDir}/subnets/${subA.replace("/", "-")}`),
    ) as { lease: { PublicIP: string } };
    assertEquals(lease.lease.PublicIP, a.ip);
    const [, m2] = await c.http(a, "/metrics");
    assertStringIncludes(m2, "\nflanctl_ready 1\n");
  } finally {
    if (immutable) await run(["chattr", "-i", immutable]);
    await c.close();
  }
});

needsRoot.test("daemon start while the file store refuses writes: waits (not ready), then acquires", async () => {
  const c = new DaemonCluster("10.95");
  let immutable = "";
  try {
    await c.init(JSON.stringify({ Network: "10.249.0.0/16", Backend: { Type: "vxlan" } }));
    const a = await c.addNode(0);
    immutable = `${c.storeDir}/tmp`;
    await Deno.mkdir(immutable, { recursive: true });
    assertEquals((await run(["chattr", "+i", immutable])).code, 0);
    const p = c.start(a, ["--resync-interval", "1", "--lease-ttl", TTL]);
    let exited: number | null = null;
    p.status.then((s) => (exited = s.code));
    await waitFor(
      () => `the start to fail and be retried; log:\n${a.log.join("\n")}`,
      () => a.log.some((l) => l.includes("acquiring a lease failed; retrying")),
    );
    await new Promise((res) => setTimeout(res, 2000));
    assert(exited === null, `the daemon exited (${exited}); log:\n${a.log.join("\n")}`);
    assertEquals((await c.http(a, "/readyz"))[0], 503);
    await run(["chattr", "-i", immutable]);
    immutable = "";
    await c.waitReady(a, 30_000);
  } finally {
    if (immutable) await run(["chattr", "-i", immutable]);
    await c.close();
  }
});
