/**
 * deploy/kube-flanctl.yml, parsed with the `yaml` package: the objects of flannel's kube-flannel.yml with
 * the same names, the RBAC verbs flannel's kube subnet manager needs, the ConfigMap's conflist and net-conf
 * (valid for flanctl's own parsers), and a DaemonSet whose arguments and env flanctl's parsers accept.
 */
import { parseAllDocuments } from "yaml";
import { assert, assertEquals } from "../tests/assert.ts";
import { ROOT } from "../tests/netns.ts";
import { parseNetConfig } from "../lib/config/netconf.ts";
import { parseDaemonArgs } from "../lib/daemon/options.ts";
import { buildProgram } from "../cli/root.ts";

// deno-lint-ignore no-explicit-any
type Any = any;

const docs: Any[] = parseAllDocuments(Deno.readTextFileSync(`${ROOT}deploy/kube-flanctl.yml`))
  .map((d) => d.toJS()).filter((d) => d);
const get = (kind: string) => docs.filter((d) => d.kind === kind);

Deno.test("kube-flanctl.yml: kube-flannel.yml's objects and RBAC", () => {
  assertEquals(docs.map((d) => `${d.kind}/${d.metadata.namespace ?? ""}/${d.metadata.name}`), [
    "Namespace//kube-flannel",
    "ClusterRole//flannel",
    "ClusterRoleBinding//flannel",
    "Role/kube-flannel/flannel-netconf",
    "RoleBinding/kube-flannel/flannel-netconf",
    "ServiceAccount/kube-flannel/flannel",
    "ConfigMap/kube-flannel/kube-flannel-cfg",
    "DaemonSet/kube-flannel/kube-flannel-ds",
  ]);
  const rules = get("ClusterRole")[0].rules.map((r: Any) => [r.apiGroups, r.resources, r.verbs]);
  assertEquals(rules, [
    [[""], ["pods"], ["get", "list", "watch"]],
    [[""], ["nodes"], ["get", "list", "watch"]],
    [[""], ["nodes/status"], ["patch"]],
    [[""], ["namespaces"], ["list", "watch"]],
    [["networking.k8s.io"], ["networkpolicies"], ["list", "watch"]],
    [[""], ["events"], ["list"]],
  ]);
  // flanctl's addition: `get` on the one ConfigMap kube-flannel-cfg (doctor on the host reads net-conf.json).
  const role = get("Role")[0];
  assertEquals(role.rules.map((r: Any) => [r.apiGroups, r.resources, r.resourceNames, r.verbs]), [
    [[""], ["configmaps"], ["kube-flannel-cfg"], ["get"]],
  ]);
  const rb = get("RoleBinding")[0];
  assertEquals([rb.roleRef.kind, rb.roleRef.name, rb.subjects], ["Role", "flannel-netconf", [
    { kind: "ServiceAccount", name: "flannel", namespace: "kube-flannel" },
  ]]);
  const b = get("ClusterRoleBinding")[0];
  assertEquals([b.roleRef.kind, b.roleRef.name, b.subjects], ["ClusterRole", "flannel", [
    { kind: "ServiceAccount", name: "flannel", namespace: "kube-flannel" },
  ]]);
});

Deno.test("kube-flanctl.yml: ConfigMap conflist and net-conf", () => {
  const data = get("ConfigMap")[0].data;
  const cni = JSON.parse(data["cni-conf.json"]);
  assertEquals([cni.name, cni.cniVersion], ["cbr0", "0.3.1"]);
  assertEquals(cni.plugins, [
    { type: "flannel", delegate: { hairpinMode: true, isDefaultGateway: true } },
    { type: "portmap", capabilities: { portMappings: true } },
  ]);
  const net = parseNetConfig(data["net-conf.json"]);
  assertEquals([String(net.network), net.backend.type, net.enableNFTables], [
    "10.244.0.0/16",
    "vxlan",
    false,
  ]);
});

Deno.test("kube-flanctl.yml: DaemonSet as kube-flannel-ds, args and env flanctl accepts", () => {
  const ds = get("DaemonSet")[0];
  const pod = ds.spec.template.spec;
  assertEquals([pod.hostNetwork, pod.priorityClassName, pod.serviceAccountName], [
    true,
    "system-node-critical",
    "flannel",
  ]);
  assertEquals(pod.tolerations, [{ operator: "Exists", effect: "NoSchedule" }]);
  assertEquals(ds.spec.selector.matchLabels, { app: "flannel" });
  const c = pod.containers[0];
  assertEquals(c.securityContext.capabilities.add, ["NET_ADMIN", "NET_RAW"]);
  assertEquals(c.securityContext.privileged, false);
  assertEquals(c.resources.requests.memory, "64Mi");
  const env = Object.fromEntries(c.env.map((e: Any) => [e.name, e.value ?? e.valueFrom.fieldRef.fieldPath]));
  assertEquals(env, {
    POD_NAME: "metadata.name",
    POD_NAMESPACE: "metadata.namespace",
    EVENT_QUEUE_DEPTH: "5000",
    CONT_WHEN_CACHE_NOT_READY: "false",
  });
  // The daemon's argument list is accepted by flanctl's flanneld-compatible parser, with its meaning.
  assertEquals(c.command, ["/usr/local/bin/flanctl", "daemon"]);
  const a = parseDaemonArgs(c.args, {});
  assertEquals([a.daemon.ipMasq, a.store.kubeSubnetMgr, a.daemon.healthzPort], [true, true, 8081]);
  assertEquals(c.livenessProbe.httpGet.path, "/healthz");
  assertEquals(c.readinessProbe.httpGet.path, "/readyz");
  // Volumes: /run/flannel, the CNI dirs, the ConfigMap, xtables.lock (FileOrCreate), mounted where flannel does.
  const vols = Object.fromEntries(
    pod.volumes.map((v: Any) => [v.name, v.hostPath?.path ?? v.configMap?.name]),
  );
  assertEquals(vols, {
    run: "/run/flannel",
    "cni-plugin": "/opt/cni/bin",
    cni: "/etc/cni/net.d",
    "cni-state": "/var/lib/cni",
    "flannel-cfg": "kube-flannel-cfg",
    "xtables-lock": "/run/xtables.lock",
  });
  assertEquals(pod.volumes.find((v: Any) => v.name === "xtables-lock").hostPath.type, "FileOrCreate");
  const mounts = (x: Any) => Object.fromEntries(x.volumeMounts.map((m: Any) => [m.name, m.mountPath]));
  assertEquals(mounts(c), {
    run: "/run/flannel",
    "flannel-cfg": "/etc/kube-flannel/",
    "xtables-lock": "/run/xtables.lock",
    cni: "/etc/cni/net.d",
    "cni-plugin": "/opt/cni/bin",
    "cni-state": "/var/lib/cni",
  });
  // The CNI dirs reach the daemon container read-only (doctor's view from the DaemonSet pod), never writable.
  for (const m of c.volumeMounts.filter((m: Any) => m.name.startsWith("cni"))) {
    assertEquals(m.readOnly, true, `${m.name} read-only in the daemon container`);
  }
  // The init container runs install-cni with options the command really has.
  const init = pod.initContainers[0];
  assertEquals(mounts(init), {
    "cni-plugin": "/opt/cni/bin",
    cni: "/etc/cni/net.d",
    "flannel-cfg": "/etc/kube-flannel/",
  });
  assertEquals(init.args[0], "install-cni");
  const cmd = buildProgram().commands.find((x) => x.name() === "install-cni")!;
  const longs = new Set(cmd.options.map((o) => o.long));
  for (const arg of init.args.slice(1)) assert(longs.has(arg.split("=")[0]), `install-cni has ${arg}`);
});
