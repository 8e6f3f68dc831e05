/**
 * Kernel layer, route lookups (RTM_GETROUTE with fibmatch): the matched route for output and input
 * (forwarded) packets, compared with `ip -j route get … fibmatch`, and the errno of failed lookups.
 */
import { needsRoot } from "./root.ts";
import { assertEquals } from "./assert.ts";
import { ipJson, sh, withNetns } from "./netns.ts";
import { openNetlink, routeGet } from "../lib/netlink/mod.ts";

const ip = (ns: string, ...args: string[]) => sh("ip", "-n", ns, ...args);

needsRoot.test("netlink routeGet: output and input lookups match ip route get fibmatch; failures carry the errno", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("rg");
    await ip(ns, "link", "add", "br0", "type", "bridge");
    await ip(ns, "link", "add", "d0", "type", "veth", "peer", "name", "d1");
    await ip(ns, "link", "set", "d1", "up");
    await ip(ns, "addr", "add", "10.9.1.1/24", "dev", "br0");
    await ip(ns, "addr", "add", "192.168.77.2/24", "dev", "d0");
    await ip(ns, "link", "set", "br0", "up");
    await ip(ns, "link", "set", "d0", "up");
    await ip(ns, "route", "add", "10.9.2.0/24", "via", "10.9.2.0", "dev", "d0", "onlink");
    await sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1");
    const h = openNetlink({ name: ns });
    try {
      // Output lookup.
      const out = routeGet(h, { dst: "10.9.2.7" });
      const [want] = await ipJson<{ dst: string; gateway: string; dev: string; flags: string[] }[]>(
        ns,
        "route",
        "get",
        "10.9.2.7",
        "fibmatch",
      );
      assertEquals(
        { route: out.route, gw: out.gateway, dev: out.devName, flags: out.flags, table: out.table },
        { route: want.dst, gw: want.gateway, dev: want.dev, flags: want.flags, table: 254 },
      );
      // Input lookup: a packet from the bridge side forwarded to the peer subnet.
      const fwd = routeGet(h, { dst: "10.9.2.7", src: "10.9.1.5", iif: "br0" });
      assertEquals([fwd.route, fwd.devName, fwd.type, fwd.errno], ["10.9.2.0/24", "d0", "unicast", null]);
      // Local delivery.
      assertEquals(routeGet(h, { dst: "10.9.1.1" }).type, "local");
      // No route: ENETUNREACH.
      const none = routeGet(h, { dst: "172.31.0.1" });
      assertEquals([none.route, none.errno], [null, 101]);
      // Forwarding off: the input lookup fails (EHOSTUNREACH... or EXDEV with rp_filter); the kernel says which.
      await sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=0");
      const off = routeGet(h, { dst: "10.9.2.7", src: "10.9.1.5", iif: "br0" });
      assertEquals(off.errno !== null && off.route === null, true, JSON.stringify(off));
    } finally {
      h.close();
    }
  });
});
