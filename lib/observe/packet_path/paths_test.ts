import { assertEquals } from "../../../tests/assert.ts";
import { offlineSnapshot } from "../fake/offline_snapshot.ts";
import type { NodeSnapshot } from "../snapshot.ts";
import type { NetConfig } from "../../config/types.ts";
import { overlayDevice } from "./paths.ts";

function withBackend(type: string): NodeSnapshot {
  const ctx = offlineSnapshot();
  ctx.store.config = { backend: { type, raw: {} } } as unknown as NetConfig;
  return ctx;
}

Deno.test("overlayDevice: the device each backend's pod traffic leaves by", () => {
  assertEquals(overlayDevice(withBackend("vxlan")), "flannel.1");
  assertEquals(overlayDevice(withBackend("udp")), "flannel0");
  assertEquals(overlayDevice(withBackend("wireguard")), "flannel-wg");
  // host-gw leaves by the underlay: none known in an empty snapshot.
  assertEquals(overlayDevice(withBackend("host-gw")), "");
  assertEquals(overlayDevice(withBackend("alloc")), "");
});
