/**
 * `flanctl lab exec node1 -- flanctl doctor` on a healthy lab: the doctor checks the lab node exactly as a
 * real one (its namespace, its files at the default paths, the lab's file store at /var/lib/flanctl),
 * its active checks (daemon /readyz, pings to the peer) work there, and its printed fix commands repair
 * what it finds.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assertEquals } from "./assert.ts";
import { flanctlCmd } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";
import type { FindingId } from "../lib/doctor/mod.ts";

interface Report {
  summary: { status: string; exitCode: number };
  checks: { id: FindingId; severity: string; detail: string; fix: string[] }[];
}

needsRoot.test({
  name: "doctor: healthy lab node (lab exec node1 -- flanctl doctor) is all ok and exits 0",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab("td", ["--nodes", "2", "--pods-per-node", "1"], undefined, async (s, name) => {
      const readyz = `http://127.0.0.1:${s.healthzPort}/readyz`;
      const doctor = () =>
        // neigh-gc reads the host-wide neighbour table, which the tests running beside this one fill: it is
        // skipped here and proven by its own tests (lib/doctor/checks/neigh_test.ts, tests/doctor_kernel_test.ts).
        labExec(
          name,
          "node1",
          flanctlCmd("doctor", "-o", "json", "--probe", "--readyz-url", readyz, "--skip", "neigh-gc"),
        );
      const r = await doctor();
      const rep = JSON.parse(r.stdout) as Report;
      const notOk = rep.checks.filter((c) => c.severity !== "ok");
      assertEquals(notOk, [], r.stdout);
      assertEquals(rep.summary.status, "OK");
      assertEquals(r.code, 0, r.stderr);
      // The active checks ran against the live lab: the daemon's /readyz and both peers' addresses.
      assertEquals(rep.checks.find((c) => c.id === "readyz")!.detail, `${readyz} → 200`);
      assertEquals(
        rep.checks.find((c) => c.id === "peer-probe")!.detail,
        "1 peer(s) answer on PublicIP and VTEP address; DF probes of 1450 bytes pass",
      );
    });
  },
});
