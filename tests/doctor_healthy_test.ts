/**
 * `flanctl doctor` on a healthy fixture node: every check ok, exit 0, readable output (snapshot), JSON
 * shape, `--probe` and `--readyz-url` against live namespaces.
 * @module
 */
import { needsRoot } from "./root.ts";
import { httpGet } from "../lib/observe/http_get.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, nsRun } from "./netns.ts";
import {
  doctorArgs,
  findings,
  killChild,
  normalize,
  runDoctorJson,
  withDoctorNode,
} from "./doctor_fixture.ts";
import { checkSnapshot } from "./doctor_snapshot.ts";

needsRoot.test("doctor: healthy node reports all ok and exits 0 (table snapshot, json, probe, readyz)", async () => {
  await withDoctorNode(async (n) => {
    let server: Deno.ChildProcess | null = null;
    try {
      // A readiness endpoint inside the node namespace (served by python's http.server).
      await Deno.mkdir(`${n.dir}/www`);
      await Deno.writeTextFile(`${n.dir}/www/readyz`, "ok");
      server = new Deno.Command("ip", {
        args: [
          "netns",
          "exec",
          n.node,
          "python3",
          "-m",
          "http.server",
          "-b",
          "127.0.0.1",
          "-d",
          `${n.dir}/www`,
          "18285",
        ],
        stdout: "null",
        stderr: "null",
      }).spawn();
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        if ((await httpGet(n.node, "http://127.0.0.1:18285/readyz", 1000)).status === 200) break;
        await new Promise((r) => setTimeout(r, 100));
      }

      // neigh-gc reads the host-wide neighbour table, which the tests running beside this one fill: it is
      // skipped here and proven by its own tests (lib/doctor/checks/neigh_test.ts, tests/doctor_kernel_test.ts).
      const run = await runDoctorJson(
        n,
        "--probe",
        "--readyz-url",
        "http://127.0.0.1:18285/readyz",
        "--skip",
        "neigh-gc",
      );
      const notOk = run.checks.filter((c) => c.severity !== "ok");
      assertEquals(notOk, [], `healthy node has non-ok findings:\n${run.stdout}\n${run.stderr}`);
      assertEquals(run.code, 0);
      assertEquals(run.summary.status, "OK");
      assertEquals(
        findings(run, "peer-probe")[0].detail,
        "1 peer(s) answer on PublicIP and VTEP address; DF probes of 1450 bytes pass",
      );
      assertEquals(findings(run, "readyz")[0].severity, "ok");
      assert(run.checks.length >= 30, `expected >= 30 findings, got ${run.checks.length}`);
      for (const c of run.checks) {
        assert(
          typeof c.id === "string" && typeof c.detail === "string" && Array.isArray(c.fix),
          JSON.stringify(c),
        );
      }

      // Table output: summary line first, snapshot of the whole text (neigh-gc skipped, as above).
      const t = await flanctl(doctorArgs(n, "--skip", "neigh-gc"));
      assertEquals(t.code, 0, t.stderr);
      assertStringIncludes(t.stdout.split("\n")[0], "DOCTOR OK: 0 critical, 0 warning, 0 unknown");
      await checkSnapshot("doctor_healthy", normalize(t.stdout, n));

      // Overlay fault: the peer's VXLAN device goes down, its underlay address still answers.
      await nsRun(n.peer, ["ip", "link", "set", "flannel.1", "down"]);
      const broken = await runDoctorJson(n, "--probe", "--readyz-url", "http://127.0.0.1:18286/readyz");
      const probe = findings(broken, "peer-probe")[0];
      assertEquals(probe.severity, "critical");
      assertStringIncludes(
        probe.detail,
        "PublicIP 192.0.2.11 answers, VTEP 10.244.2.0 does not (overlay fault)",
      );
      const ready = findings(broken, "readyz")[0];
      assertEquals(ready.severity, "critical");
      assertStringIncludes(ready.detail, "http://127.0.0.1:18286/readyz → no answer");
      assertEquals(broken.code, 2);

      // Underlay fault: the peer's underlay address is gone.
      await nsRun(n.peer, ["ip", "addr", "flush", "dev", "eth0"]);
      const under = await runDoctorJson(n, "--probe", "--skip", "readyz");
      assertStringIncludes(
        findings(under, "peer-probe")[0].detail,
        "PublicIP 192.0.2.11 does not answer (underlay fault)",
      );
    } finally {
      await killChild(server);
    }
  });
});
