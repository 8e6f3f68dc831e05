/**
 * The doctor run as from the DaemonSet's container (`kubectl exec -n kube-flannel ds/kube-flannel-ds --
 * flanctl doctor`): the node's network namespace, but a mount namespace where /run/netns is empty and the
 * CNI dirs are not mounted, and KUBERNETES_SERVICE_HOST set. What it cannot see is unknown with the
 * reason, never critical; and ip_forward off on a node with no pod yet says what that means.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctlCmd, nsRun, nsSh, ROOT } from "./netns.ts";
import { doctorArgs, type DoctorRun, expectFinding, withDoctorNode } from "./doctor_fixture.ts";

/** `cmd` in a mount namespace of its own whose /run/netns is an empty tmpfs: a DaemonSet container's view. */
function withoutRunNetns(cmd: string[]): string[] {
  const script = 'mount -t tmpfs none /run/netns && exec "$@"';
  return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", ...cmd];
}

needsRoot.test("doctor from a pod: unseen CNI dirs and pod namespaces are unknown with why, not critical", async () => {
  await withDoctorNode(async (n) => {
    // The fixture's flags minus --netns (the container is in the node's namespace already), with CNI dirs
    // that the container does not have.
    const args = doctorArgs(n, "-o", "json").filter((a, i, all) =>
      a !== "--netns" && all[i - 1] !== "--netns"
    )
      .map((a) =>
        a === n.confDir ? "/etc/cni/net.d.notmounted" : a === n.binDir ? "/opt/cni/bin.notmounted" : a
      );
    const r = await nsRun(n.node, withoutRunNetns(flanctlCmd(...args)), {
      env: { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" },
    });
    const run = { ...JSON.parse(r.stdout), code: r.code, stdout: r.stdout, stderr: r.stderr } as DoctorRun;
    const cfg = expectFinding(
      run,
      "cni-config",
      "unknown",
      "/etc/cni/net.d.notmounted is not visible from this container",
    );
    assertStringIncludes(cfg.detail, "deploy/kube-flanctl.yml mounts it read-only");
    expectFinding(run, "cni-binaries", "unknown", "is not visible from this container");
    for (const id of ["veths", "pod-netns", "hostlocal-ips", "cni-cache"] as const) {
      const f = run.checks.find((c) => c.id === id)!;
      assertEquals(f.severity, "unknown", `${id}: ${f.detail}`);
      assertStringIncludes(f.detail, "lead to namespaces this process cannot see or enter");
    }
    assertEquals(run.checks.filter((c) => c.severity === "critical").map((c) => c.id), [], r.stdout);
  });
});

needsRoot.test("doctor: ip_forward off on a node with no pod yet is what the bridge plugin will set, not critical", async () => {
  await withDoctorNode(async (n) => {
    await nsSh(n.node, "ip", "link", "del", n.podVeth);
    await nsSh(n.node, "sysctl", "-qw", "net.ipv4.ip_forward=0");
    const r = await nsRun(
      n.node,
      flanctlCmd(
        ...doctorArgs(n, "-o", "json").filter((a, i, all) => a !== "--netns" && all[i - 1] !== "--netns"),
      ),
    );
    const run = { ...JSON.parse(r.stdout), code: r.code, stdout: r.stdout, stderr: r.stderr } as DoctorRun;
    const f = expectFinding(run, "ip-forward", "ok", "net.ipv4.ip_forward = 0");
    assertStringIncludes(f.detail, "no pod on this node yet: nothing to forward");
    assert(f.detail.includes("sysctl -w net.ipv4.ip_forward=1"), f.detail);
  });
});

Deno.test("deploy/kube-flanctl.yml: the daemon container mounts the CNI dirs read-only for doctor", async () => {
  const { parseAllDocuments } = await import("yaml");
  const docs = parseAllDocuments(Deno.readTextFileSync(`${ROOT}deploy/kube-flanctl.yml`)).map((d) =>
    d.toJS()
  );
  const ds = docs.find((d) => d?.kind === "DaemonSet");
  const spec = ds.spec.template.spec;
  const c = spec.containers.find((x: { name: string }) => x.name === "kube-flannel");
  const mounts = new Map<string, { name: string; readOnly?: boolean }>(
    c.volumeMounts.map((m: { mountPath: string; name: string; readOnly?: boolean }) => [m.mountPath, m]),
  );
  for (
    const [path, host] of [["/etc/cni/net.d", "/etc/cni/net.d"], ["/opt/cni/bin", "/opt/cni/bin"], [
      "/var/lib/cni",
      "/var/lib/cni",
    ]]
  ) {
    const m = mounts.get(path);
    assert(m, `${path} is not mounted into the daemon container`);
    assertEquals(m.readOnly, true, path);
    const vol = spec.volumes.find((v: { name: string }) => v.name === m.name);
    assertEquals(vol.hostPath.path, host);
  }
});

Deno.test("deploy/kube-flanctl.yml: the ServiceAccount may get the kube-flannel-cfg ConfigMap only", async () => {
  const { parseAllDocuments } = await import("yaml");
  const docs = parseAllDocuments(Deno.readTextFileSync(`${ROOT}deploy/kube-flanctl.yml`)).map((d) =>
    d.toJS()
  );
  const roles = docs.filter((d) => d?.kind === "Role");
  assertEquals(roles.length, 1);
  const role = roles[0];
  assertEquals([role.metadata.name, role.metadata.namespace], ["flannel-netconf", "kube-flannel"]);
  assertEquals(role.rules, [
    { apiGroups: [""], resources: ["configmaps"], resourceNames: ["kube-flannel-cfg"], verbs: ["get"] },
  ]);
  const cm = docs.find((d) => d?.kind === "ConfigMap");
  assertEquals([cm.metadata.name, cm.metadata.namespace], ["kube-flannel-cfg", "kube-flannel"]);
  const rb = docs.find((d) => d?.kind === "RoleBinding");
  assertEquals(rb.metadata.namespace, "kube-flannel");
  assertEquals(rb.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "flannel-netconf" });
  assertEquals(rb.subjects, [{ kind: "ServiceAccount", name: "flannel", namespace: "kube-flannel" }]);
  // The ClusterRole grants no ConfigMap (nor Secret) anywhere.
  const cr = docs.find((d) => d?.kind === "ClusterRole");
  const res = cr.rules.flatMap((r: { resources: string[] }) => r.resources);
  assert(!res.includes("configmaps") && !res.includes("secrets"), res.join(","));
});

needsRoot.test("trace from a pod: a local pod behind cni0 whose namespace is hidden is not called missing", async () => {
  await withDoctorNode(async (n) => {
    const args = [
      "trace",
      "10.244.1.2",
      "--subnet-file",
      n.subnetFile,
      "--store-dir",
      n.storeDir,
      "-o",
      "json",
    ];
    const hidden = await nsRun(n.node, withoutRunNetns(flanctlCmd(...args)));
    const rep = JSON.parse(hidden.stdout) as {
      ok: boolean;
      hops: { step: string; ok: boolean; detail: string }[];
    };
    assertEquals(rep.ok, true, hidden.stdout);
    const last = rep.hops[rep.hops.length - 1];
    assertEquals(last.step, "pod", hidden.stdout);
    assertStringIncludes(last.detail, "the pod itself is not verified");
    // Where the namespaces are visible, the same trace verifies the pod.
    const seen = await nsRun(n.node, flanctlCmd(...args));
    const full = JSON.parse(seen.stdout) as { ok: boolean; hops: { detail: string }[] };
    assertEquals(full.ok, true, seen.stdout);
    assert(!full.hops.some((h) => h.detail.includes("not verified")), seen.stdout);
  });
});
