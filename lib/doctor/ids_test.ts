import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { UsageError } from "../base/errors.ts";
import { ALL_CHECKS } from "./mod.ts";
import { CHECK_IDS, OLD_IDS, parseCheckIds } from "./ids.ts";

Deno.test("doctor ids: one check per id, run in the order CHECK_IDS lists them", () => {
  assertEquals(ALL_CHECKS.map((c) => c.id), [...CHECK_IDS]);
});

Deno.test("doctor ids: --skip parses ids and old aliases, drops blanks, refuses the rest naming the flag", () => {
  assertEquals([...parseCheckIds("--skip", "")], []);
  assertEquals([...parseCheckIds("--skip", " mtu, ,peer-route-missing,peer-routes")], ["mtu", "peer-routes"]);
  for (const [old, now] of Object.entries(OLD_IDS)) assertEquals([...parseCheckIds("--skip", old)], [now]);
  for (const bad of ["nonsense", "doctor", "MTU", "toString", "__proto__"]) {
    const e = assertThrows(() => parseCheckIds("--skip", `mtu,${bad}`), UsageError);
    assertEquals(
      e.message.startsWith(`--skip: unknown check id '${bad}' (known: daemon, ip-forward,`),
      true,
      e.message,
    );
  }
});
