/** Config parsing of the bridge plugin (no kernel: the plugin's ADD/DEL are tested as root in tests/). */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CniError, ErrCode } from "./spec.ts";
import { loadBridgeConf } from "./bridge.ts";

Deno.test("bridge config: the bridge name is a kernel interface name (15 bytes, not . or ..)", () => {
  // Found by bridge_prop_test.ts: the length was counted in UTF-16 units, so "ࠀ𐀀¡ࠀ!ࠀ" (6 characters,
  // 18 bytes) was taken and the kernel's refusal came at ADD; "." and ".." were taken too.
  for (const bridge of ["ࠀ𐀀¡ࠀ!ࠀ", "é".repeat(8), ".", "..", "a b", "x".repeat(16), ""]) {
    const e = assertThrows(() => loadBridgeConf({ name: "n", bridge }, "1.0.0", ""), CniError);
    assertEquals((e as CniError).code, ErrCode.InvalidNetworkConfig, bridge);
  }
  for (const bridge of ["cni0", "x".repeat(15), "é".repeat(7)]) {
    assertEquals(loadBridgeConf({ name: "n", bridge }, "1.0.0", "").bridge, bridge);
  }
});
