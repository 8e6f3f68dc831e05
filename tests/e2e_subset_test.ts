/**
 * Issue 35: a bounded subset of Kubernetes' own sig-network e2e suite, inside `deno task test` so CI keeps it
 * green: `deno task e2e` (tools/e2e.ts) on a 3-node `lab up --kube` with the focus below — the granular pod
 * checks (intra-node and inter-node, node-pod; http and udp), two Service and two DNS conformance tests and
 * HostPort. The full selection runs in `deno task e2e`.
 *
 * Needs e2e.test, agnhost, kube-proxy, CoreDNS and the Kubernetes programs install.sh --dev builds: without
 * them the test is skipped with a warning, and fails under CI=true.
 */
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { needsRoot } from "./root.ts";
import { ROOT, run, TEST_PREFIX } from "./netns.ts";
import { missingKubePeers } from "./kube_peers.ts";

/** The subset: 9 specs of the default selection (`e2e.test --ginkgo.dry-run` selects exactly these). */
export const SUBSET_FOCUS =
  String.raw`\[sig-network\] (Networking Granular Checks: Pods should function for ` +
  String.raw`(intra-pod|node-pod) communication: (http|udp)|Services should serve (a basic endpoint|` +
  String
    .raw`multiport endpoints) from pods|DNS should provide DNS for (the cluster|services) *\[Conformance\]|HostPort)`;

const missing = missingKubePeers("the e2e subset", ["agnhost", "e2e.test"]);

needsRoot.test({
  name: "Kubernetes' e2e suite (sig-network subset) passes on a 3-node lab up --kube",
  ignore: missing.length > 0,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const name = `${TEST_PREFIX}e2e${crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 4)}`
      .slice(0, 12);
    const reports = await Deno.makeTempDir({ prefix: "flanctl-e2e-" });
    try {
      const t0 = Date.now();
      const r = await run([
        Deno.execPath(),
        "run",
        "-A",
        "--no-check=remote",
        `${ROOT}tools/e2e.ts`,
        "--name",
        name,
        "--report-dir",
        reports,
        "--focus",
        SUBSET_FOCUS,
      ]);
      console.error(`  deno task e2e (subset): ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      const ran = /^Ran (\d+) of \d+ Specs.*$/m.exec(r.stdout);
      const line = /^(SUCCESS|FAIL)! -- .*$/m.exec(r.stdout);
      console.error(`  ${ran?.[0] ?? "no 'Ran' line"}\n  ${line?.[0] ?? "no summary line"}`);
      assertEquals(r.code, 0, `${r.stdout.slice(-4000)}\n${r.stderr.slice(-3000)}`);
      assertEquals(ran?.[1], "9", r.stdout.slice(-3000));
      assertStringIncludes(line?.[0] ?? "", " 0 Failed");
      // The suite's JUnit report is kept.
      assertStringIncludes(Deno.readTextFileSync(`${reports}/junit_01.xml`), "<testsuite");
    } finally {
      await run([
        Deno.execPath(),
        "run",
        "-A",
        "--no-check",
        `${ROOT}main.ts`,
        "lab",
        "down",
        "--name",
        name,
      ]);
      await Deno.remove(reports, { recursive: true }).catch(() => {});
    }
  },
});
