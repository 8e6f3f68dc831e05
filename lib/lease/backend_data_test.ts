import { assertEquals } from "../../tests/assert.ts";
import { vtepMacField, vtepMacOf } from "./backend_data.ts";

const MAC = "02:aa:bb:cc:dd:02";

Deno.test("vtepMacOf: the key in any case, as encoding/json matches flanneld's VtepMAC field", () => {
  for (const key of ["VtepMAC", "vtepMAC", "vtepmac", "VTEPMAC", "VtEpMaC"]) {
    assertEquals(vtepMacOf({ VNI: 1, [key]: MAC }), MAC, key);
    assertEquals(vtepMacOf({ [key]: MAC.toUpperCase() }), MAC, `${key}, upper-case value`);
  }
});

Deno.test("vtepMacOf: other names, other shapes and bad values are no MAC", () => {
  for (const key of ["Vtep_MAC", "VtepMAC ", "VtepMACs", "vtep-mac", "Mac", "VtepMA"]) {
    assertEquals(vtepMacOf({ [key]: MAC }), null, JSON.stringify(key));
  }
  for (const data of [null, undefined, MAC, 7, [MAC], [{ VtepMAC: MAC }]]) {
    assertEquals(vtepMacOf(data), null, JSON.stringify(data));
  }
  for (const v of [null, 7, "02:aa:bb", "02-aa-bb-cc-dd-02", "0000.5e00.5301", ` ${MAC}`, { VtepMAC: MAC }]) {
    assertEquals(vtepMacOf({ VtepMAC: v }), null, JSON.stringify(v));
  }
});

Deno.test("vtepMacField: the last matching key wins (encoding/json assigns each in turn)", () => {
  const data = JSON.parse(`{"VtepMAC":"${MAC}","vtepmac":"garbage"}`);
  assertEquals(vtepMacField(data), "garbage");
  assertEquals(vtepMacOf(data), null);
  assertEquals(vtepMacOf(JSON.parse(`{"vtepmac":"garbage","VtepMAC":"${MAC}"}`)), MAC);
  assertEquals(vtepMacField({ VNI: 1 }), undefined);
});
