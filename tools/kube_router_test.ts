import { assert, assertEquals } from "../tests/assert.ts";
import { findKubeRouter, kubeRouterArgs } from "./kube_router.ts";

Deno.test("kube-router: firewall only, as k3s runs it, for the node it runs on", () => {
  const a = kubeRouterArgs("lab", 2);
  for (const f of ["--run-firewall=true", "--run-router=false", "--run-service-proxy=false"]) {
    assert(a.includes(f), f);
  }
  assert(a.includes("--hostname-override=node2"));
  assert(a.includes("--service-cluster-ip-range=10.96.0.0/16"));
  assert(a.includes("--enable-ipv6=false"));
  assert(kubeRouterArgs("lab", 1, { ipv6: true }).includes("--enable-ipv6=true"));
  assert(a.some((x) => /^--kubeconfig=\/.*\/lab\/admin\.kubeconfig$/.test(x)), a.join(" "));
});

Deno.test("kube-router: found by override, else in the dev cache at the pinned version", async () => {
  const dir = await Deno.makeTempDir();
  try {
    assertEquals(findKubeRouter({ FLANCTL_PEER_KUBE_ROUTER: `${dir}/nope` }), undefined);
    assertEquals(findKubeRouter({ FLANCTL_DEV_CACHE: dir }), undefined);
    const v = /^KUBE_ROUTER_VERSION=(\S+)$/m.exec(
      Deno.readTextFileSync(new URL("./peers/build.sh", import.meta.url)),
    )![1];
    const bin = `${dir}/kube-router-${v}/bin/kube-router`;
    await Deno.mkdir(`${dir}/kube-router-${v}/bin`, { recursive: true });
    await Deno.writeTextFile(bin, "#!/bin/sh\n", { mode: 0o755 });
    assertEquals(findKubeRouter({ FLANCTL_DEV_CACHE: dir }), bin);
    assertEquals(findKubeRouter({ FLANCTL_PEER_KUBE_ROUTER: bin, FLANCTL_DEV_CACHE: "/nonexistent" }), bin);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
