/**
 * deploy/flanctl.service stays hardened: `systemd-analyze security --offline=yes` on the unit as shipped
 * scores an overall exposure of at most 4.1 (docs/deploy.md: "4.1 OK, was 9.6 UNSAFE"), and the sandbox keeps the
 * capability bounding set to what the daemon needs. Needs systemd-analyze (systemd >= 252, Debian 12);
 * without it the test is ignored with its reason in the name.
 */
import { assert, assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { ROOT, run } from "../tests/netns.ts";

const UNIT = `${ROOT}deploy/flanctl.service`;
const HAVE = (() => {
  try {
    return new Deno.Command("systemd-analyze", { args: ["--version"] }).outputSync().success;
  } catch {
    return false;
  }
})();

Deno.test({
  name: `flanctl.service: systemd-analyze security exposure <= 4.1${HAVE ? "" : " (no systemd-analyze)"}`,
  ignore: !HAVE,
  async fn() {
    const r = await run(["systemd-analyze", "security", "--offline=yes", "--no-pager", UNIT]);
    const m = /Overall exposure level for flanctl\.service: (\d+\.\d+)/.exec(r.stdout);
    assert(m, `no exposure level in:\n${r.stdout}\n${r.stderr}`);
    assert(Number(m[1]) <= 4.1, `exposure ${m[1]} > 4.1:\n${r.stdout}`);
    const unit = await Deno.readTextFile(UNIT);
    const bounding = unit.split("\n").filter((l) => l.startsWith("CapabilityBoundingSet="));
    assertEquals(bounding, ["CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_RAW"]);
    for (const d of ["NoNewPrivileges=yes", "ProtectSystem=strict", "Type=notify"]) {
      assertStringIncludes(unit, `\n${d}\n`);
    }
  },
});
