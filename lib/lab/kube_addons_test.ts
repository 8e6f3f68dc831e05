import { assert, assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { coreDnsObjects, corefile, DNS_VIP, kubeProxyConfig, kubeProxyObjects } from "./kube_addons.ts";

// deno-lint-ignore no-explicit-any
type Any = any;
const byKind = (list: Any, kind: string) => list.items.filter((o: Any) => o.kind === kind);

Deno.test("kube add-ons: kube-proxy as kubeadm lays it out, on the control-plane endpoint", () => {
  const l: Any = kubeProxyObjects({
    server: "https://192.0.2.1:6443",
    clusterCidr: "10.244.0.0/16",
    mode: "nftables",
    image: "flanctl.local/kube-proxy:v1.37.2",
  });
  assertEquals(l.kind, "List");
  assertEquals(byKind(l, "ServiceAccount")[0].metadata, { name: "kube-proxy", namespace: "kube-system" });
  const crb = byKind(l, "ClusterRoleBinding")[0];
  assertEquals(crb.roleRef.name, "system:node-proxier");
  assertEquals(crb.subjects, [{ kind: "ServiceAccount", name: "kube-proxy", namespace: "kube-system" }]);
  const cm = byKind(l, "ConfigMap")[0];
  assertEquals(Object.keys(cm.data).sort(), ["config.conf", "kubeconfig.conf"]);
  // Not the Service VIP: kube-proxy is what makes the VIP work.
  assertStringIncludes(cm.data["kubeconfig.conf"], 'server: "https://192.0.2.1:6443"');
  assert(!cm.data["kubeconfig.conf"].includes("10.96.0.1"));
  assertStringIncludes(
    cm.data["kubeconfig.conf"],
    "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
  );
  assertStringIncludes(cm.data["config.conf"], "mode: nftables");
  assertStringIncludes(cm.data["config.conf"], 'clusterCIDR: "10.244.0.0/16"');
  const ds = byKind(l, "DaemonSet")[0];
  assertEquals(ds.metadata.namespace, "kube-system");
  const spec = ds.spec.template.spec;
  assertEquals(spec.hostNetwork, true);
  assertEquals(spec.tolerations, [{ operator: "Exists" }]);
  const c = spec.containers[0];
  assertEquals(c.securityContext, { privileged: true });
  assertEquals(c.image, "flanctl.local/kube-proxy:v1.37.2");
  assertEquals(c.volumeMounts.map((m: Any) => m.mountPath).sort(), [
    "/lib/modules",
    "/run/xtables.lock",
    "/var/lib/kube-proxy",
  ]);
  assertStringIncludes(kubeProxyConfig("10.244.0.0/16", "iptables"), "mode: iptables");
  assertStringIncludes(kubeProxyConfig("10.244.0.0/16", "iptables"), "kind: KubeProxyConfiguration\n");
  assertEquals(
    kubeProxyConfig("10.244.0.0/16", "iptables").split("\n")[0],
    "apiVersion: kubeproxy.config.k8s.io/v1alpha1",
  );
});

Deno.test("kube add-ons: CoreDNS as kubeadm deploys it, kube-dns at 10.96.0.10", () => {
  const l: Any = coreDnsObjects({ image: "flanctl.local/coredns:v1.15.0", replicas: 2 });
  const svc = byKind(l, "Service")[0];
  assertEquals(svc.metadata.name, "kube-dns");
  assertEquals(svc.spec.clusterIP, DNS_VIP);
  assertEquals(DNS_VIP, "10.96.0.10");
  assertEquals(svc.spec.ports.map((p: Any) => `${p.port}/${p.protocol}`), ["53/UDP", "53/TCP", "9153/TCP"]);
  const dep = byKind(l, "Deployment")[0];
  assertEquals(dep.metadata.name, "coredns");
  assertEquals(dep.spec.replicas, 2);
  assertEquals(dep.spec.template.spec.dnsPolicy, "Default");
  assertEquals(dep.spec.template.spec.serviceAccountName, "coredns");
  assertEquals(byKind(l, "ClusterRole")[0].metadata.name, "system:coredns");
  assertEquals(byKind(l, "ClusterRoleBinding")[0].subjects[0].name, "coredns");
  const cf = byKind(l, "ConfigMap")[0].data.Corefile;
  assertEquals(cf, corefile());
  assertStringIncludes(cf, "kubernetes cluster.local in-addr.arpa ip6.arpa {");
  assertStringIncludes(cf, "forward . /etc/resolv.conf");
});
