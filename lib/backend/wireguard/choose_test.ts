/**
 * The choice of the way at start (choose.ts) over the fake netlink and the fake generic netlink family:
 * the kernel refusing the link kind, the family missing, any other refusal, a device already there, a
 * forced way, and FLANCTL_WIREGUARD_WAY's values.
 */
import { assert, assertEquals, assertStringIncludes, assertThrows } from "../../../tests/assert.ts";
import { FakeNetlink } from "../../netlink/fake/fake_netlink.ts";
import { FakeWgGenl } from "../../netlink/fake/fake_wg_genl.ts";
import { NetlinkError, WgNetlinkError } from "../../netlink/mod.ts";
import { ConfigError } from "../../config/netconf.ts";
import { publicKeyOf } from "./keys.ts";
import { chooseDriver, wantedWay, type WgWayWanted } from "./choose.ts";
import { UserspaceDriver, WgDeviceError } from "./userspace.ts";
import { KernelDriver } from "./kernel.ts";

function world(wanted: WgWayWanted = "auto") {
  const nl = new FakeNetlink();
  const genl = new FakeWgGenl(nl, publicKeyOf);
  const started: string[] = [];
  const reasons: (string | null)[] = [];
  const choose = () =>
    chooseDriver({
      nl,
      dev: "flannel-wg",
      mtu: 1420,
      wanted,
      genl,
      userspace: (why) => {
        reasons.push(why);
        return new UserspaceDriver(nl, "flannel-wg", "/usr/bin/wireguard-go", "/tmp/x.sock", (_p, dev) => {
          started.push(dev);
          nl.addLink(dev, { kind: "tun", mtu: 1420 });
        });
      },
    });
  return { nl, genl, started, reasons, choose };
}

Deno.test("choose: the kernel way where the kernel makes the link and has the family", () => {
  const w = world();
  const c = w.choose();
  assert(c.driver instanceof KernelDriver);
  assertEquals([c.changes, c.fallback, w.started], [["created"], null, []]);
  assertEquals(w.nl.ops, ["createWireguard flannel-wg"]);
  assertEquals(w.genl.calls, ["familyId"]);
});

Deno.test("choose: the link kind refused (EOPNOTSUPP, this kernel) -> userspace, saying why", () => {
  const w = world();
  w.nl.kinds.delete("wireguard");
  const c = w.choose();
  assert(c.driver instanceof UserspaceDriver);
  assertEquals(c.driver.way, "userspace");
  assertStringIncludes(
    c.fallback!,
    "the kernel refused the link kind wireguard (EOPNOTSUPP: Unknown device type",
  );
  assertEquals(w.reasons, [c.fallback]);
  assertEquals(w.started, ["flannel-wg"]);
  assertEquals(w.nl.ops, ["createWireguard flannel-wg"]);
  assertEquals(w.genl.calls, [], "no family lookup once the link kind is refused");
  assertEquals(w.nl.link("flannel-wg")?.kind, "tun");
});

Deno.test("choose: no wireguard family (ENOENT) -> the link made is deleted, userspace", () => {
  const w = world();
  w.genl.present = false;
  const c = w.choose();
  assert(c.driver instanceof UserspaceDriver);
  assertStringIncludes(c.fallback!, "no wireguard generic netlink family (ENOENT)");
  assertEquals(w.nl.ops, ["createWireguard flannel-wg", "deleteLink flannel-wg"]);
  assertEquals(w.nl.link("flannel-wg")?.kind, "tun");
});

Deno.test("choose: any other kernel refusal is a start failure, no device left", () => {
  // The link refused with EPERM.
  const a = world();
  a.nl.createWireguard = () => {
    throw new NetlinkError("link add flannel-wg type wireguard", -1, "Operation not permitted", undefined, {
      errno: 1,
    });
  };
  const e = assertThrows(() => a.choose(), WgDeviceError);
  assertStringIncludes(e.message, "cannot make the kernel WireGuard device flannel-wg: ");
  assertStringIncludes(e.message, "Operation not permitted");
  assert(!e.message.includes("\n"));
  assertEquals([a.nl.links(), a.started], [[], []]);
  // The link made, then the family lookup fails otherwise than ENOENT: the link is deleted again.
  const b = world();
  b.genl.familyId = () => {
    throw new WgNetlinkError("the kernel refused the request: errno 13", 13);
  };
  assertThrows(() => b.choose(), WgDeviceError, "errno 13");
  assertEquals(b.nl.ops, ["createWireguard flannel-wg", "deleteLink flannel-wg"]);
  assertEquals([b.nl.links(), b.started], [[], []]);
});

Deno.test("choose: a device already there keeps its way; a forced way wins", () => {
  // wireguard-go's TUN from before a restart: userspace, nothing created or deleted.
  const a = world();
  a.nl.addLink("flannel-wg", { kind: "tun" });
  const ca = a.choose();
  assert(ca.driver instanceof UserspaceDriver);
  assertEquals([ca.changes, a.nl.ops, a.started, a.reasons], [[], [], [], [null]]);
  // A kernel link from before: kernel.
  const b = world();
  b.nl.addLink("flannel-wg", { kind: "wireguard" });
  const cb = b.choose();
  assert(cb.driver instanceof KernelDriver);
  assertEquals([cb.changes, b.nl.ops], [[], []]);
  // Forced userspace: the kernel is not tried; a kernel link is replaced by wireguard-go's.
  const c = world("userspace");
  c.nl.addLink("flannel-wg", { kind: "wireguard" });
  assert(c.choose().driver instanceof UserspaceDriver);
  assertEquals([c.nl.ops, c.started], [["deleteLink flannel-wg"], ["flannel-wg"]]);
  // Forced kernel on a kernel without it: a failure naming the knob, nothing left.
  const d = world("kernel");
  d.nl.kinds.delete("wireguard");
  const e = assertThrows(() => d.choose(), WgDeviceError, "FLANCTL_WIREGUARD_WAY=kernel");
  assertStringIncludes(e.message, "EOPNOTSUPP");
  assertEquals([d.nl.links(), d.started], [[], []]);
});

Deno.test("wantedWay: FLANCTL_WIREGUARD_WAY kernel, userspace, auto (default); else refused", () => {
  assertEquals(wantedWay({}), "auto");
  assertEquals(wantedWay({ FLANCTL_WIREGUARD_WAY: "" }), "auto");
  assertEquals(wantedWay({ FLANCTL_WIREGUARD_WAY: "Kernel" }), "kernel");
  assertEquals(wantedWay({ FLANCTL_WIREGUARD_WAY: "userspace" }), "userspace");
  assertThrows(
    () => wantedWay({ FLANCTL_WIREGUARD_WAY: "boringtun" }),
    ConfigError,
    "kernel, userspace or auto",
  );
});
