/**
 * The add-ons `lab up --kube` deploys beside flanctl, laid out as kubeadm lays them out (its v1.37 manifests):
 *
 * - kube-proxy: ServiceAccount `kube-proxy`, ClusterRoleBinding `kubeadm:node-proxier` to the built-in
 *   ClusterRole `system:node-proxier`, ConfigMap `kube-proxy` (`config.conf`: the KubeProxyConfiguration;
 *   `kubeconfig.conf`: the pod's service-account token against the control-plane endpoint itself, not the
 *   Service VIP, which kube-proxy is the one to program) and DaemonSet `kube-proxy` in kube-system
 *   (hostNetwork, privileged, /run/xtables.lock, /lib/modules, every taint tolerated).
 * - CoreDNS: ServiceAccount `coredns`, ClusterRole/ClusterRoleBinding `system:coredns`, ConfigMap `coredns`
 *   (kubeadm's Corefile), Deployment `coredns` (2 replicas) and Service `kube-dns` at {@link DNS_VIP}.
 *
 * Lab differences, each for a reason of this machine: `conntrack.maxPerCore: 0` (nf_conntrack_max is the
 * host's and read-only in a node's namespace), images never pulled (imported into every node's containerd).
 * @module
 */

/** The cluster DNS Service's address (kubelet's clusterDNS) and the cluster domain. */
export const DNS_VIP = "10.96.0.10";
export const CLUSTER_DOMAIN = "cluster.local";

/** kube-proxy's proxy modes the lab offers (`lab up --kube --proxy-mode`). */
export const PROXY_MODES = ["iptables", "nftables"] as const;
export type ProxyMode = typeof PROXY_MODES[number];

type Obj = Record<string, unknown>;

/** kube-proxy's configuration API group (tools/mirrors_test.ts knows `*.config.k8s.io` is not a host). */
export const KUBE_PROXY_API_GROUP = "kubeproxy.config.k8s.io";

/** kube-proxy's KubeProxyConfiguration (kubeadm's defaults but for conntrack.maxPerCore). */
export function kubeProxyConfig(clusterCidr: string, mode: ProxyMode): string {
  return [
    `apiVersion: ${KUBE_PROXY_API_GROUP}/v1alpha1`,
    "kind: KubeProxyConfiguration",
    "bindAddress: 0.0.0.0",
    "clientConnection:",
    "  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf",
    `clusterCIDR: ${JSON.stringify(clusterCidr)}`,
    "conntrack:",
    "  maxPerCore: 0",
    `mode: ${mode}`,
  ].join("\n") + "\n";
}

/** kube-proxy's kubeconfig.conf: the control-plane endpoint (not the VIP) with the pod's token. */
export function kubeProxyKubeconfig(server: string): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- cluster:",
    "    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
    `    server: ${JSON.stringify(server)}`,
    "  name: default",
    "contexts:",
    "- context:",
    "    cluster: default",
    "    namespace: default",
    "    user: default",
    "  name: default",
    "current-context: default",
    "users:",
    "- name: default",
    "  user:",
    "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
  ].join("\n") + "\n";
}

/** Every kube-proxy object, as one List for `kubectl apply -f -`. */
export function kubeProxyObjects(
  o: { server: string; clusterCidr: string; mode: ProxyMode; image: string },
): Obj {
  const ns = "kube-system";
  const labels = { "k8s-app": "kube-proxy" };
  return list([
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "kube-proxy", namespace: ns } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "kubeadm:node-proxier" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "system:node-proxier" },
      subjects: [{ kind: "ServiceAccount", name: "kube-proxy", namespace: ns }],
    },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "kube-proxy", namespace: ns, labels: { app: "kube-proxy" } },
      data: {
        "config.conf": kubeProxyConfig(o.clusterCidr, o.mode),
        "kubeconfig.conf": kubeProxyKubeconfig(o.server),
      },
    },
    {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: "kube-proxy", namespace: ns, labels },
      spec: {
        selector: { matchLabels: labels },
        updateStrategy: { type: "RollingUpdate" },
        template: {
          metadata: { labels },
          spec: {
            containers: [{
              name: "kube-proxy",
              image: o.image,
              imagePullPolicy: "IfNotPresent",
              command: [
                "/usr/local/bin/kube-proxy",
                "--config=/var/lib/kube-proxy/config.conf",
                "--hostname-override=$(NODE_NAME)",
              ],
              env: [{ name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } }],
              securityContext: { privileged: true },
              volumeMounts: [
                { mountPath: "/var/lib/kube-proxy", name: "kube-proxy" },
                { mountPath: "/run/xtables.lock", name: "xtables-lock" },
                { mountPath: "/lib/modules", name: "lib-modules", readOnly: true },
              ],
            }],
            hostNetwork: true,
            nodeSelector: { "kubernetes.io/os": "linux" },
            priorityClassName: "system-node-critical",
            serviceAccountName: "kube-proxy",
            tolerations: [{ operator: "Exists" }],
            volumes: [
              { name: "kube-proxy", configMap: { name: "kube-proxy" } },
              { name: "xtables-lock", hostPath: { path: "/run/xtables.lock", type: "FileOrCreate" } },
              { name: "lib-modules", hostPath: { path: "/lib/modules" } },
            ],
          },
        },
      },
    },
  ]);
}

/** kubeadm's Corefile. */
export function corefile(): string {
  return [
    ".:53 {",
    "    errors",
    "    health {",
    "       lameduck 5s",
    "    }",
    "    ready",
    `    kubernetes ${CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {`,
    "       pods insecure",
    "       fallthrough in-addr.arpa ip6.arpa",
    "       ttl 30",
    "    }",
    "    prometheus :9153",
    "    forward . /etc/resolv.conf {",
    "       max_concurrent 1000",
    "    }",
    "    cache 30 {",
    `       disable success ${CLUSTER_DOMAIN}`,
    `       disable denial ${CLUSTER_DOMAIN}`,
    "    }",
    "    loop",
    "    reload",
    "    loadbalance",
    "}",
  ].join("\n") + "\n";
}

/** Every CoreDNS object (kubeadm's), as one List for `kubectl apply -f -`. */
export function coreDnsObjects(o: { image: string; replicas?: number }): Obj {
  const ns = "kube-system";
  const app = { "k8s-app": "kube-dns" };
  return list([
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "coredns", namespace: ns } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "system:coredns" },
      rules: [
        {
          apiGroups: [""],
          resources: ["endpoints", "services", "pods", "namespaces"],
          verbs: ["list", "watch"],
        },
        { apiGroups: [""], resources: ["nodes"], verbs: ["get"] },
        { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list", "watch"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "system:coredns" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "system:coredns" },
      subjects: [{ kind: "ServiceAccount", name: "coredns", namespace: ns }],
    },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "coredns", namespace: ns },
      data: { Corefile: corefile() },
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "coredns", namespace: ns, labels: app },
      spec: {
        replicas: o.replicas ?? 2,
        strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } },
        selector: { matchLabels: app },
        template: {
          metadata: { labels: app },
          spec: {
            priorityClassName: "system-cluster-critical",
            serviceAccountName: "coredns",
            affinity: {
              podAntiAffinity: {
                preferredDuringSchedulingIgnoredDuringExecution: [{
                  weight: 100,
                  podAffinityTerm: {
                    labelSelector: {
                      matchExpressions: [{ key: "k8s-app", operator: "In", values: ["kube-dns"] }],
                    },
                    topologyKey: "kubernetes.io/hostname",
                  },
                }],
              },
            },
            tolerations: [
              { key: "CriticalAddonsOnly", operator: "Exists" },
              { key: "node-role.kubernetes.io/control-plane", effect: "NoSchedule" },
            ],
            nodeSelector: { "kubernetes.io/os": "linux" },
            containers: [{
              name: "coredns",
              image: o.image,
              imagePullPolicy: "IfNotPresent",
              resources: { limits: { memory: "170Mi" }, requests: { cpu: "100m", memory: "70Mi" } },
              args: ["-conf", "/etc/coredns/Corefile"],
              volumeMounts: [{ name: "config-volume", mountPath: "/etc/coredns", readOnly: true }],
              ports: [
                { containerPort: 53, name: "dns", protocol: "UDP" },
                { containerPort: 53, name: "dns-tcp", protocol: "TCP" },
                { containerPort: 9153, name: "metrics", protocol: "TCP" },
              ],
              securityContext: {
                allowPrivilegeEscalation: false,
                capabilities: { add: ["NET_BIND_SERVICE"], drop: ["ALL"] },
                readOnlyRootFilesystem: true,
              },
              livenessProbe: {
                httpGet: { path: "/health", port: 8080, scheme: "HTTP" },
                initialDelaySeconds: 60,
                timeoutSeconds: 5,
                successThreshold: 1,
                failureThreshold: 5,
              },
              readinessProbe: { httpGet: { path: "/ready", port: 8181, scheme: "HTTP" } },
            }],
            dnsPolicy: "Default",
            volumes: [{
              name: "config-volume",
              configMap: { name: "coredns", items: [{ key: "Corefile", path: "Corefile" }] },
            }],
          },
        },
      },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: "kube-dns",
        namespace: ns,
        labels: { ...app, "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS" },
        annotations: { "prometheus.io/port": "9153", "prometheus.io/scrape": "true" },
      },
      spec: {
        selector: app,
        clusterIP: DNS_VIP,
        ports: [
          { name: "dns", port: 53, protocol: "UDP", targetPort: 53 },
          { name: "dns-tcp", port: 53, protocol: "TCP", targetPort: 53 },
          { name: "metrics", port: 9153, protocol: "TCP", targetPort: 9153 },
        ],
      },
    },
  ]);
}

function list(items: Obj[]): Obj {
  return { apiVersion: "v1", kind: "List", items };
}
