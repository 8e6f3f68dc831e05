/**
 * The generic netlink socket against this machine's kernel (read-only family lookups: no privilege, no
 * change anywhere). The kernel here has no WireGuard module, so "wireguard" resolves to none.
 */
import { assertEquals } from "../../tests/assert.ts";
import { GENL_ID_CTRL } from "./codec/wgmsg.ts";
import { genlFamilyId } from "./wgkernel.ts";

Deno.test("wgkernel: the generic netlink controller resolves itself (the socket and codec work)", () => {
  assertEquals(genlFamilyId("nlctrl"), GENL_ID_CTRL);
});

Deno.test("wgkernel: a family the kernel lacks resolves to null (ENOENT), not an error", () => {
  assertEquals(genlFamilyId("flanctl-none"), null);
  const wg = genlFamilyId();
  // Asked as root, the kernel may load the module first: look after the lookup.
  let loaded = false;
  try {
    Deno.statSync("/sys/module/wireguard");
    loaded = true;
  } catch { /* not loaded */ }
  assertEquals(wg !== null, loaded, "the wireguard family exists exactly when the module is loaded");
});
