/**
 * What the `lab up --kube` tests (tests/lab_kube_test.ts, lab_kube_services_test.ts and the two dual-stack
 * ones) share: flanctl from the checkout, the images a kube lab loads (flanctl's, kube-proxy's, CoreDNS's), `lab up --kube` with them,
 * and a rollout restart of flanctl's DaemonSet, waited for.
 * @module
 */
import { assertEquals } from "./assert.ts";
import { ROOT, run, type RunResult } from "./netns.ts";

/** flanctl from this checkout (main.ts, no type check). */
export const flanctl = (...a: string[]): Promise<RunResult> =>
  run([Deno.execPath(), "run", "-A", "--no-check", "--quiet", `${ROOT}main.ts`, ...a]);

/** Builds flanctl's image and the kube-proxy and CoreDNS images into `work` (image.tar, <peer>.tar). */
export async function buildLabImages(work: string): Promise<void> {
  const img = await run([`${ROOT}deploy/build-image.sh`, `${work}/image.tar`]);
  assertEquals(img.code, 0, img.stderr.slice(-3000));
  for (const peer of ["kube-proxy", "coredns"]) {
    const t = Date.now();
    const p = await run([`${ROOT}deploy/build-image.sh`, "--peer", peer, `${work}/${peer}.tar`]);
    assertEquals(p.code, 0, p.stderr.slice(-3000));
    console.error(`  ${peer} image: ${((Date.now() - t) / 1000).toFixed(1)} s`);
  }
}

/**
 * `lab up --kube --nodes 2` named `name` with the images {@link buildLabImages} made in `work` and the
 * checkout's manifest; `extra` flags go before them.
 */
export function labUpKube(name: string, work: string, ...extra: string[]): Promise<RunResult> {
  return flanctl(
    ...["lab", "up", "--kube", "--nodes", "2", "--name", name, ...extra],
    ...["--image", `${work}/image.tar`, "--manifest", `${ROOT}deploy/kube-flanctl.yml`],
    ...["--kube-proxy-image", `${work}/kube-proxy.tar`, "--coredns-image", `${work}/coredns.tar`],
  );
}

/** `kubectl rollout restart` of flanctl's DaemonSet, then its `rollout status` (150 s at most) must pass. */
export async function restartFlannelDaemonSet(
  kubectl: (...a: string[]) => Promise<RunResult>,
): Promise<void> {
  assertEquals((await kubectl("-n", "kube-flannel", "rollout", "restart", "ds/kube-flannel-ds")).code, 0);
  const rolled = await kubectl(
    "-n",
    "kube-flannel",
    "rollout",
    "status",
    "ds/kube-flannel-ds",
    "--timeout=150s",
  );
  assertEquals(rolled.code, 0, rolled.stdout + rolled.stderr);
}
