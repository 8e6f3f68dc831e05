import { assertEquals } from "../../../tests/assert.ts";
import { DEFAULT_PATHS, NodeSnapshot } from "../snapshot.ts";
import type { NetConfig } from "../../config/types.ts";
import { overlayDevice } from "./paths.ts";

function withBackend(type: string): NodeSnapshot {
  const ctx = new NodeSnapshot({
    netns: null,
    ...DEFAULT_PATHS,
    subnetFile: "/nonexistent/subnet.env",
    readyzUrl: null,
    probe: false,
    openStore: null,
    storeExplicit: false,
    skip: new Set(),
  });
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
