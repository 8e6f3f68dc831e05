/**
 * Issue 36's real peer: kube-router's NetworkPolicy controller (firewall only, as k3s runs it; one process per
 * node, tools/kube_router.ts) on a 2-node `lab up --kube`, held to the verdict matrix (tests/netpol_matrix.ts):
 * 7 pods in 3 namespaces, every pair × 80/81 × TCP/UDP, for each scenario of tests/netpol_scenarios.ts (no
 * policy; six ingress policies; three egress policies; all deleted) — the grid must be the table the API's
 * semantics give. flanctl's own enforcement runs the same `matrixLab` with its manifest as the enforcer; the
 * two grids are then compared cell by cell (`diffMatrix`).
 *
 * Needs the peers install.sh --dev builds (Kubernetes, kube-proxy, CoreDNS, agnhost, kube-router) and ipset:
 * without them the test is skipped with a warning, and fails under CI=true.
 */
import { assertEquals } from "./assert.ts";
import { needsRoot } from "./root.ts";
import { missingKubePeers } from "./kube_peers.ts";
import { requirePeers } from "./peers.ts";
import { diffMatrix, formatMatrix, KUBE_ROUTER, matrixLab, parseMatrix } from "./netpol_matrix.ts";
import { SCENARIOS } from "./netpol_scenarios.ts";

const missing = missingKubePeers("the NetworkPolicy matrix with kube-router", ["agnhost"]);
const peers = missing.length === 0 && requirePeers(["kube-router", "ipset"]);

needsRoot.test({
  name: "NetworkPolicy verdict matrix: kube-router on a 2-node lab up --kube gives the API's verdicts",
  ignore: !peers,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const results = await matrixLab(KUBE_ROUTER, SCENARIOS, (l) => console.error(`  ${l}`));
    const failed: string[] = [];
    for (const r of results) {
      const diff = diffMatrix(r.matrix, parseMatrix(r.scenario.want), ["kube-router", "API"]);
      console.error(
        `  ${r.scenario.name}: ${diff.length ? `${diff.length} cells differ` : "as the API says"} ` +
          `(${(r.ms / 1000).toFixed(1)} s, ${r.rounds} rounds)\n${formatMatrix(r.matrix)}`,
      );
      if (diff.length) failed.push(`${r.scenario.name}:\n  ${diff.join("\n  ")}`);
    }
    assertEquals(failed, [], failed.join("\n"));
  },
});
