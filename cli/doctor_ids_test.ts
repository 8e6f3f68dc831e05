/**
 * Check ids read as what is checked (`peer-routes`, not `peer-route-missing`); the old ids stay valid
 * for `--skip`; an unknown id is a usage error that lists both.
 * @module
 */
import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { flanctl } from "../tests/netns.ts";
import { CHECK_IDS, OLD_IDS } from "../lib/doctor/mod.ts";

Deno.test("doctor ids: new ids listed, old ids accepted by --skip as aliases, unknown ids refused", async () => {
  for (const [old, now] of Object.entries(OLD_IDS)) {
    assertEquals(CHECK_IDS.includes(now), true, `${old} → ${now} is a check`);
    assertEquals((CHECK_IDS as readonly string[]).includes(old), false, `${old} is only an alias`);
  }
  assertEquals(CHECK_IDS[0], "daemon");
  // A missing netns is exit 3 ("could not check"): the flags, old alias included, were accepted.
  const r = await flanctl([
    "doctor",
    "--netns",
    "flanctl-no-such-ns",
    "--skip",
    "peer-route-missing,veth-orphan",
  ]);
  assertEquals(r.code, 3, r.stderr);
  const bad = await flanctl(["doctor", "--skip", "no-such-check"]);
  assertEquals(bad.code, 2);
  assertStringIncludes(bad.stderr, "old aliases: peer-route-missing");
});
