import { assertEquals } from "../../tests/assert.ts";
import { offlineSnapshot } from "../observe/fake/offline_snapshot.ts";
import type { NodeSnapshot } from "../observe/snapshot.ts";
import { parseNetConfig } from "../config/netconf.ts";
import type { LinkInfo } from "../netlink/types.ts";
import { backendStatus } from "./status.ts";

/** A node of backend `type` whose flannel-wg (when `kind` is given) is of that link kind. */
function node(type: string, kind?: string | null): NodeSnapshot {
  const ctx = offlineSnapshot();
  ctx.store.config = parseNetConfig(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: type } }));
  const wg: LinkInfo = {
    index: 7,
    name: "flannel-wg",
    kind: kind ?? null,
    flags: ["UP"],
    up: true,
    operstate: "UNKNOWN",
    mtu: 1420,
    mac: null,
    master: null,
    parent: null,
    linkNetnsId: null,
  };
  ctx.kernel = {
    links: kind === undefined ? [] : [wg],
    addrs: [],
    routes: [],
    neigh: [],
    fdb: [],
    source: "test",
  };
  return ctx;
}

Deno.test("status backend.way: the kernel's link, wireguard-go's TUN, none; absent for other backends", () => {
  const way = (ctx: NodeSnapshot) => {
    const b = backendStatus(ctx);
    return "way" in b ? b.way : "(no key)";
  };
  assertEquals(way(node("wireguard", "wireguard")), "kernel");
  assertEquals(way(node("wireguard", "tun")), "userspace");
  assertEquals(way(node("wireguard")), null, "no device: no way");
  assertEquals(way(node("wireguard", "dummy")), null);
  assertEquals(way(node("vxlan")), "(no key)");
  assertEquals(backendStatus(node("wireguard", "wireguard")), {
    type: "wireguard",
    device: "flannel-wg",
    deviceUp: true,
    mtu: 1420,
    deviceV6: null,
    way: "kernel",
  });
});
