/**
 * The programs a `lab up --kube` test needs, found as the lab finds them (lib/lab/kube.ts `findProgram`). A
 * missing one skips the test with a warning naming it and the fix, and under CI=true registers a failing
 * test instead: CI may not skip a kube test.
 */
import { findProgram, KUBE_PROGRAMS } from "../lib/lab/kube.ts";

/** What every kube lab runs: the Kubernetes programs, the node runtime, the images' tools, the add-ons. */
export const KUBE_LAB_NEEDS = [
  ...KUBE_PROGRAMS,
  "etcd",
  "containerd",
  "ctr",
  "openssl",
  "busybox",
  "iptables",
  "mmdebstrap",
  "kube-proxy",
  "coredns",
];

/**
 * The programs of {@link KUBE_LAB_NEEDS} and `extra` that are missing (empty: run the test). `what` names the
 * test in the warning and in the CI failure.
 */
export function missingKubePeers(what: string, extra: string[] = []): string[] {
  const missing = [...KUBE_LAB_NEEDS, ...extra].filter((p) => !findProgram(p));
  if (missing.length) {
    const why = `${what} needs ${missing.join(", ")} (./install.sh --dev builds and installs them)`;
    if (Deno.env.get("CI") === "true") {
      Deno.test(`${what} needs the Kubernetes peers`, () => {
        throw new Error(`${why}; under CI the test may not be skipped`);
      });
    } else console.error(`warning: ${why}; skipping it`);
  }
  return missing;
}
