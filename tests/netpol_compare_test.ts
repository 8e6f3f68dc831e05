/**
 * Issue 36's proof against the real peer: the same verdict matrix (tests/netpol_matrix.ts, the scenarios of
 * tests/netpol_scenarios.ts) from flanctl's own enforcement (`lab up --kube --network-policy`) and from
 * kube-router's policy controller (firewall only, as k3s runs it, beside a lab without flanctl's policy), each
 * on a 2-node lab of its own, compared cell by cell — and each with the table the API's semantics give.
 *
 * Needs the peers install.sh --dev builds (Kubernetes, kube-proxy, CoreDNS, agnhost, kube-router) and ipset:
 * without them the test is skipped with a warning, and fails under CI=true.
 */
import { assertEquals } from "./assert.ts";
import { needsRoot } from "./root.ts";
import { missingKubePeers } from "./kube_peers.ts";
import { requirePeers } from "./peers.ts";
import {
  diffMatrix,
  FLANCTL,
  formatMatrix,
  KUBE_ROUTER,
  matrixLab,
  parseMatrix,
  type ScenarioResult,
  timing,
} from "./netpol_matrix.ts";
import { SCENARIOS } from "./netpol_scenarios.ts";

const missing = missingKubePeers("the NetworkPolicy matrix, flanctl beside kube-router", ["agnhost"]);
const peers = missing.length === 0 && requirePeers(["kube-router", "ipset"]);

needsRoot.test({
  name: "NetworkPolicy verdict matrix: flanctl's enforcement gives kube-router's grid, cell by cell",
  ignore: !peers,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const runs: Record<string, ScenarioResult[]> = {};
    for (const e of [FLANCTL, KUBE_ROUTER]) {
      runs[e.name] = await matrixLab(e, SCENARIOS, (l) => console.error(`  ${e.name}: ${l}`));
    }
    const failed: string[] = [];
    SCENARIOS.forEach((s, i) => {
      const fl = runs.flanctl[i], kr = runs["kube-router"][i];
      const vsPeer = diffMatrix(fl.matrix, kr.matrix, ["flanctl", "kube-router"]);
      const vsApi = diffMatrix(fl.matrix, parseMatrix(s.want), ["flanctl", "API"]);
      const verdict = vsPeer.length ? `differs from kube-router in ${vsPeer.length} cells` : "= kube-router";
      console.error(
        `  ${s.name}: flanctl ${verdict} (flanctl ${timing(fl)}; kube-router ${timing(kr)})\n` +
          formatMatrix(fl.matrix),
      );
      if (vsPeer.length) failed.push(`${s.name}, flanctl vs kube-router:\n  ${vsPeer.join("\n  ")}`);
      if (vsApi.length) failed.push(`${s.name}, flanctl vs the API's table:\n  ${vsApi.join("\n  ")}`);
      // kube-router held to the table too: a peer that drifts from the API is named as such, not as flanctl.
      const peerVsApi = diffMatrix(kr.matrix, parseMatrix(s.want), ["kube-router", "API"]);
      if (peerVsApi.length) {
        failed.push(`${s.name}, kube-router vs the API's table:\n  ${peerVsApi.join("\n  ")}`);
      }
    });
    assertEquals(failed, [], failed.join("\n"));
  },
});
