/**
 * `flanctl doctor` finds the daemon through the state file it writes next to subnet.env: running → ok
 * (with its /healthz), killed → `daemon` critical, reported first, exit 2; a clean stop removes the file.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctlCmd, sh } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";
import type { FindingId } from "../lib/doctor/mod.ts";

interface Report {
  summary: { status: string; exitCode: number };
  checks: { id: FindingId; severity: string; detail: string; why: string | null }[];
}

function daemonPid(s: { procs: { pid: number; what: string }[] }, node: string): number {
  const p = s.procs.find((p) => p.what === `daemon ${node}`);
  assert(p, `no daemon ${node} in ${JSON.stringify(s.procs)}`);
  return p.pid;
}

async function waitGone(pid: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      const st = await Deno.readTextFile(`/proc/${pid}/stat`);
      if (st.slice(st.lastIndexOf(")") + 2).startsWith("Z")) return;
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

needsRoot.test({
  name: "doctor: daemon killed on a lab node → critical 'daemon' first, exit 2; running → ok with /healthz",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab("tk", ["--nodes", "2", "--pods-per-node", "1"], undefined, async (s, name) => {
      // neigh-gc reads the host-wide neighbour table, which the tests running beside this one fill: it is
      // skipped here and proven by its own tests (lib/doctor/checks/neigh_test.ts, tests/doctor_kernel_test.ts).
      const doctor = async () => {
        const r = await labExec(name, "node1", flanctlCmd("doctor", "-o", "json", "--skip", "neigh-gc"));
        return { r, rep: JSON.parse(r.stdout) as Report };
      };
      const before = await doctor();
      const ok = before.rep.checks.find((c) => c.id === "daemon")!;
      assertEquals(ok.severity, "ok", before.r.stdout);
      assertStringIncludes(ok.detail, `pid ${daemonPid(s, "node1")}`);
      assertStringIncludes(ok.detail, `/healthz → 200`);
      assertEquals(before.r.code, 0, before.r.stdout);

      // A daemon in a container (another pid namespace) writes a pid the host cannot check: its /healthz
      // decides. The file is rewritten as such a daemon would have written it.
      const file = `${s.nodes[0].dir}/run/flannel/flanctl.json`;
      const real = await Deno.readTextFile(file);
      await Deno.writeTextFile(file, JSON.stringify({ ...JSON.parse(real), pid: 1, pidNs: "pid:[1]" }));
      const boxed = await doctor();
      const b = boxed.rep.checks.find((c) => c.id === "daemon")!;
      assertEquals(b.severity, "ok", boxed.r.stdout);
      assertStringIncludes(b.detail, "pid 1 in another pid namespace (a container)");
      assertStringIncludes(b.detail, "/healthz → 200");
      await Deno.writeTextFile(file, real);

      const pid = daemonPid(s, "node1");
      Deno.kill(pid, "SIGKILL");
      await waitGone(pid);
      // A finding the dead daemon explains (nobody restores a deleted peer route) points to it.
      const ns = s.nodes[0].netns;
      const peerRoute = (await sh("ip", "-n", ns, "route", "show", "dev", "flannel.1")).split("\n")
        .find((l) => l.includes("onlink"))!.split(" ")[0];
      await sh("ip", "-n", ns, "route", "del", peerRoute);
      const after = await doctor();
      assertEquals(after.r.code, 2, after.r.stdout);
      assertEquals(after.rep.summary.status, "CRITICAL");
      const first = after.rep.checks[0];
      assertEquals([first.id, first.severity], ["daemon", "critical"], after.r.stdout);
      assertStringIncludes(first.detail, `daemon pid ${pid}`);
      assertStringIncludes(first.detail, "is not running");
      const route = after.rep.checks.find((c) => c.id === "peer-routes")!;
      assertEquals(route.severity, "critical", after.r.stdout);
      assert(route.why!.startsWith("likely cause: the daemon is not running (see 'daemon')"), route.why!);
      // The state file is still there (the daemon could not remove it): that is how the doctor knew.
      const state = JSON.parse(await Deno.readTextFile(`${s.nodes[0].dir}/run/flannel/flanctl.json`));
      assertEquals(state.pid, pid);
      // node2's daemon stops cleanly (SIGTERM) and removes its state file.
      const pid2 = daemonPid(s, "node2");
      Deno.kill(pid2, "SIGTERM");
      await waitGone(pid2);
      let gone = false;
      try {
        await Deno.stat(`${s.nodes[1].dir}/run/flannel/flanctl.json`);
      } catch (e) {
        gone = e instanceof Deno.errors.NotFound;
      }
      assert(gone, "a cleanly stopped daemon removes its state file");
    });
  },
});
