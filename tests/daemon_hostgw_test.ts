/**
 * `flanctl daemon` with host-gw and with VXLAN DirectRouting, on an underlay of two L2 segments joined by
 * a router: peers on the same segment get a direct route via their public IP; a peer one hop away is
 * refused by host-gw (clear log line, skipped) and reached through VXLAN with DirectRouting.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { DaemonCluster, fdbs, neighs, routes, waitFor } from "./daemon_fixture.ts";
import { nsRun } from "./netns.ts";

async function ping(fromNs: string, ip: string): Promise<boolean> {
  return (await nsRun(fromNs, ["ping", "-c", "1", "-W", "1", ip])).code === 0;
}

needsRoot.test("daemon host-gw: routes via peer public IPs, pods ping, off-segment peer refused", async () => {
  const c = new DaemonCluster();
  try {
    await c.init(JSON.stringify({ Network: "10.245.0.0/16", Backend: { Type: "host-gw" } }));
    const a = await c.addNode(0), b = await c.addNode(0), far = await c.addNode(1);
    for (const n of [a, b, far]) c.start(n, ["--resync-interval", "1"]);
    for (const n of [a, b, far]) await c.waitReady(n);
    assertEquals((await c.subnetEnv(a)).FLANNEL_MTU, "1500");
    const subB = await c.subnetOf(b), subFar = await c.subnetOf(far);
    await waitFor(
      "host-gw route to B",
      async () => (await routes(a.ns)).some((r) => r.dst === subB && r.gateway === b.ip && r.dev === "eth0"),
    );
    const links = (await nsRun(a.ns, ["ip", "-j", "link"])).stdout;
    assert(!links.includes("flannel."), "host-gw creates no device");
    const pa = await c.addPod(a), pb = await c.addPod(b);
    await waitFor(c.explain("pod A → pod B over host-gw"), () => ping(pa.ns, pb.ip));
    // The peer behind the router is skipped with a clear reason, and nothing is installed for it.
    await waitFor(
      () => `refusal logged; log:\n${a.log.join("\n")}`,
      () =>
        a.log.some((l) => l.includes("skipping peer") && l.includes(subFar) && l.includes("one L2 segment")),
    );
    assert(!(await routes(a.ns)).some((r) => r.dst === subFar), "no route to an off-segment peer");
    // A hand-deleted route comes back.
    await nsRun(a.ns, ["ip", "route", "del", subB]);
    await waitFor(
      "route repaired",
      async () => (await routes(a.ns)).some((r) => r.dst === subB && r.gateway === b.ip),
    );
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon vxlan DirectRouting: direct route on the same segment, vxlan across the router", async () => {
  const c = new DaemonCluster();
  try {
    await c.init(
      JSON.stringify({ Network: "10.246.0.0/16", Backend: { Type: "vxlan", DirectRouting: true } }),
    );
    const a = await c.addNode(0), b = await c.addNode(0), far = await c.addNode(1);
    for (const n of [a, b, far]) c.start(n, ["--resync-interval", "1"]);
    for (const n of [a, b, far]) await c.waitReady(n);
    const subB = await c.subnetOf(b), subFar = await c.subnetOf(far);
    const farMac = JSON.parse(
      (await nsRun(far.ns, ["ip", "-j", "link", "show", "flannel.1"])).stdout,
    )[0].address as string;
    await waitFor(
      "direct route to B",
      async () => (await routes(a.ns)).some((r) => r.dst === subB && r.gateway === b.ip && r.dev === "eth0"),
    );
    await waitFor(
      "vxlan route to the far node",
      async () =>
        (await routes(a.ns)).some((r) =>
          r.dst === subFar && r.gateway === subFar.split("/")[0] && r.dev === "flannel.1" &&
          r.flags.includes("onlink")
        ),
    );
    assert(
      (await neighs(a.ns, "flannel.1")).some((n) => n.dst === subFar.split("/")[0] && n.lladdr === farMac),
    );
    assert((await fdbs(a.ns, "flannel.1")).some((f) => f.mac === farMac && f.dst === far.ip));
    assert(
      !(await neighs(a.ns, "flannel.1")).some((n) => n.dst === subB.split("/")[0]),
      "no ARP for a direct peer",
    );
    const pa = await c.addPod(a), pb = await c.addPod(b), pf = await c.addPod(far);
    await waitFor(c.explain("pod A → pod B (direct)"), () => ping(pa.ns, pb.ip));
    await waitFor(c.explain("pod A → far pod (vxlan)"), () => ping(pa.ns, pf.ip));
  } finally {
    await c.close();
  }
});
