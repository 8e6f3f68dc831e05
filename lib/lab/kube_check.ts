/**
 * `lab check` on a `--kube` lab: Services and DNS from every node's pods. In namespace `flanctl-check` one
 * pod per node (busybox httpd, pinned with nodeName) and one ClusterIP Service per pod (`check-node1`, …);
 * then from each pod: `kubernetes.default.svc.cluster.local` resolves to the API's VIP (CoreDNS through the
 * kube-dns VIP), and every Service answers with its own pod's hostname, once by its ClusterIP (kube-proxy's
 * rules) and once by name (DNS + kube-proxy) — every (source node, destination node) pair crosses the network.
 * In a dual-stack lab (`--ip-family dual`) the Services are `RequireDualStack` and every pod also asks each
 * pod by its IPv6 address, each Service by its IPv6 ClusterIP and by name resolved to an AAAA record.
 * The namespace is deleted afterwards. Answers from the API and the pods are bounded and never printed raw.
 * @module
 */
import { SANDBOX_IMAGE } from "./containerd.ts";
import { CLUSTER_DOMAIN } from "./kube_addons.ts";
import { sleep } from "./proc.ts";
import type { CmdResult } from "./proc.ts";

/** The namespace the check's pods and Services live in (deleted after the check). */
export const CHECK_NAMESPACE = "flanctl-check";

/** A check pod: its Service's name and ClusterIP, and the pod's own address. */
export interface CheckTarget {
  name: string;
  ip: string;
  podIP: string;
  /** Dual stack: the IPv6 ClusterIP and pod address ("" when the API gave none: those probes fail). */
  ip6?: string;
  podIP6?: string;
}

/** One probe from one node's pod. */
export interface KubeProbe {
  from: string;
  /**
   * "dns kubernetes.default", "pod check-node2" (its address), "vip check-node2" (ClusterIP), "name …"; in
   * dual stack also "pod6 …", "vip6 …" and "name6 …" (IPv6 address, IPv6 ClusterIP, AAAA).
   */
  what: string;
  ok: boolean;
  detail: string;
}

/** The check's objects for `nodes` nodes: one pod and one Service per node (RequireDualStack if `dual`). */
export function checkObjects(nodes: number, dual = false): Record<string, unknown> {
  const items: Record<string, unknown>[] = [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: CHECK_NAMESPACE } },
  ];
  for (let i = 1; i <= nodes; i++) {
    const name = `check-node${i}`;
    const labels = { app: "flanctl-check", "flanctl-check": name };
    items.push({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: CHECK_NAMESPACE, labels },
      spec: {
        nodeName: `node${i}`,
        terminationGracePeriodSeconds: 0,
        containers: [{
          name: "web",
          image: SANDBOX_IMAGE,
          imagePullPolicy: "Never",
          // /etc/hostname (the pod's name, written by the runtime) tells which backend answered.
          command: ["/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/"],
          ports: [{ containerPort: 8080, protocol: "TCP" }],
        }],
      },
    });
    items.push({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name, namespace: CHECK_NAMESPACE },
      spec: {
        selector: labels,
        ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }],
        ...(dual ? { ipFamilyPolicy: "RequireDualStack", ipFamilies: ["IPv4", "IPv6"] } : {}),
      },
    });
  }
  return { apiVersion: "v1", kind: "List", items };
}

/**
 * The script a source pod runs: one line per probe, `<kind> <target> ok <answer> [<address>]` or
 * `<kind> <target> fail <why>`. busybox's own resolver (nslookup) and nc: the static busybox's wget and any
 * glibc name lookup crash in an image without NSS libraries. Each probe is tried up to 3 times (a fresh
 * Service's rules and CoreDNS's view settle within a second or two).
 */
export function probeScript(targets: CheckTarget[]): string {
  const fqdn = (svc: string) => `${svc}.${CHECK_NAMESPACE}.svc.${CLUSTER_DOMAIN}`;
  const bb = "/bin/busybox";
  const lines = [
    `resolve() { ${bb} nslookup -type=a "$1" 2>&1 | ${bb} grep -A3 '^Name:' | ` +
    `${bb} grep -o '[0-9][0-9.]*[0-9]$' | ${bb} head -1; }`,
    `resolve6() { ${bb} nslookup -type=aaaa "$1" 2>&1 | ${bb} grep -A3 '^Name:' | ` +
    `${bb} grep -o '[0-9a-f]*:[0-9a-f:]*$' | ${bb} head -1; }`,
    `get() { printf 'GET /etc/hostname HTTP/1.0\\r\\n\\r\\n' | ${bb} nc -w 3 "$1" "$2" 2>&1 | ${bb} tail -1; }`,
    // probe KIND TARGET PORT HOST|-NAME|=NAME: "-NAME" is resolved first (A), "=NAME" (AAAA), each try.
    `probe() { for n in 1 2 3; do h=$4; case $h in -*) h=$(resolve "\${h#-}");; ` +
    `=*) h=$(resolve6 "\${h#=}");; esac; ` +
    `a=""; [ -n "$h" ] && a=$(get "$h" "$3"); [ "$a" = "$2" ] && break; ${bb} sleep 1; done; ` +
    `if [ -n "$a" ]; then echo "$1 $2 ok $a $h"; elif [ -n "$h" ]; then echo "$1 $2 fail no answer from $h:$3"; ` +
    `else echo "$1 $2 fail name not resolved"; fi; }`,
    `for n in 1 2 3; do ip=$(resolve kubernetes.default.svc.${CLUSTER_DOMAIN}); [ -n "$ip" ] && break; ` +
    `${bb} sleep 1; done`,
    `if [ -n "$ip" ]; then echo "dns kubernetes.default ok $ip"; else echo "dns kubernetes.default fail not resolved"; fi`,
  ];
  for (const t of targets) {
    lines.push(`probe pod ${t.name} 8080 ${t.podIP}`);
    lines.push(`probe vip ${t.name} 80 ${t.ip}`);
    lines.push(`probe name ${t.name} 80 -${fqdn(t.name)}`);
    if (t.podIP6) lines.push(`probe pod6 ${t.name} 8080 ${t.podIP6}`);
    if (t.ip6) lines.push(`probe vip6 ${t.name} 80 ${t.ip6}`);
    if (t.ip6 !== undefined) lines.push(`probe name6 ${t.name} 80 =${fqdn(t.name)}`);
  }
  return lines.join("\n") + "\n";
}

const clean = (s: string) => s.slice(0, 120).replace(/[^\x20-\x7e]/g, "?");

/** Parses one source pod's output into probes; a probe with no line failed ("no answer"). */
export function parseProbes(
  from: string,
  out: string,
  targets: CheckTarget[],
): KubeProbe[] {
  const seen = new Map<string, { ok: boolean; detail: string }>();
  for (const line of out.slice(0, 65536).split("\n")) {
    const m = /^(dns|pod6?|vip6?|name6?) (\S+) (ok|fail) ?(.*)$/.exec(line.trim());
    if (m) seen.set(`${m[1]} ${m[2]}`, { ok: m[3] === "ok", detail: clean(m[4]) });
  }
  const want = [
    "dns kubernetes.default",
    ...targets.flatMap((t) => [
      `pod ${t.name}`,
      `vip ${t.name}`,
      `name ${t.name}`,
      ...(t.ip6 !== undefined ? [`pod6 ${t.name}`, `vip6 ${t.name}`, `name6 ${t.name}`] : []),
    ]),
  ];
  return want.map((what) => {
    const s = seen.get(what);
    // The API's Service resolves to the first address of the service network.
    if (what === "dns kubernetes.default") {
      if (!s) return { from, what, ok: false, detail: "no answer" };
      return { from, what, ok: s.ok && s.detail === "10.96.0.1", detail: s.detail || "no address" };
    }
    // The right pod answered (its own name), at the address wanted: by name, the Service's ClusterIP.
    const [kind, name] = what.split(" ");
    const t = targets.find((x) => x.name === name)!;
    const want = { pod: t.podIP, vip: t.ip, name: t.ip, pod6: t.podIP6, vip6: t.ip6, name6: t.ip6 }[kind];
    if (!want) return { from, what, ok: false, detail: "no IPv6 address from the API" };
    if (!s) return { from, what, ok: false, detail: "no answer" };
    const [answer, addr] = s.detail.split(" ");
    return { from, what, ok: s.ok && answer === name && addr === want, detail: s.detail };
  });
}

/** Runs the check on a --kube lab through `kubectl` (a function running kubectl with the admin credentials). */
export async function kubeServiceCheck(
  nodes: number,
  kubectl: (args: string[], stdin?: string) => Promise<CmdResult>,
  dual = false,
): Promise<KubeProbe[]> {
  // A previous check's namespace may still be terminating (deleted without waiting): let it go first.
  for (let i = 0; i < 120; i++) {
    const ns = await kubectl(["get", "namespace", CHECK_NAMESPACE, "-o", "name", "--ignore-not-found"]);
    if (ns.code === 0 && !ns.stdout.trim()) break;
    await sleep(500);
  }
  const made = await kubectl(["apply", "-f", "-"], JSON.stringify(checkObjects(nodes, dual)));
  if (made.code !== 0) {
    return [{ from: "-", what: "create the check's pods", ok: false, detail: clean(made.stderr.trim()) }];
  }
  try {
    const names = Array.from({ length: nodes }, (_, i) => `check-node${i + 1}`);
    const end = Date.now() + 120_000;
    let ready = false;
    while (Date.now() < end && !ready) {
      const r = await kubectl([
        "-n",
        CHECK_NAMESPACE,
        "get",
        "pods",
        "-o",
        'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
      ]);
      const rows = r.stdout.split("\n").map((l) => l.trim().split(" "));
      ready = names.every((n) => rows.some((x) => x[0] === n && x[1] === "True"));
      if (!ready) await sleep(1000);
    }
    if (!ready) return [{ from: "-", what: "the check's pods ready", ok: false, detail: "not within 120 s" }];
    const v4 = /^[0-9]{1,3}(\.[0-9]{1,3}){3}$/, v6 = /^[0-9a-f]{0,4}(:[0-9a-f]{0,4}){2,7}$/;
    const rows = async (kind: string, path: string, ip: RegExp) => {
      const r = await kubectl([
        "-n",
        CHECK_NAMESPACE,
        "get",
        kind,
        "-o",
        `jsonpath={range .items[*]}{.metadata.name} {${path}}{"\\n"}{end}`,
      ]);
      return new Map(
        r.stdout.split("\n").map((l) => l.trim().split(" ")).filter((x) =>
          names.includes(x[0]) && ip.test(x[1] ?? "")
        )
          .map(([n, a]) => [n, a]),
      );
    };
    const svcIPs = await rows("svc", ".spec.clusterIP", v4);
    const podIPs = await rows("pods", ".status.podIP", v4);
    const svcIPs6 = dual ? await rows("svc", ".spec.clusterIPs[1]", v6) : null;
    const podIPs6 = dual ? await rows("pods", ".status.podIPs[1].ip", v6) : null;
    const targets: CheckTarget[] = names.filter((n) => svcIPs.has(n) && podIPs.has(n))
      .map((name) => ({
        name,
        ip: svcIPs.get(name)!,
        podIP: podIPs.get(name)!,
        ...(svcIPs6 && podIPs6 ? { ip6: svcIPs6.get(name) ?? "", podIP6: podIPs6.get(name) ?? "" } : {}),
      }));
    const script = probeScript(targets);
    const results = await Promise.all(names.map(async (from) => {
      const r = await kubectl([
        "-n",
        CHECK_NAMESPACE,
        "exec",
        from,
        "--",
        "/bin/busybox",
        "sh",
        "-c",
        script,
      ]);
      return parseProbes(from.replace(/^check-/, ""), r.stdout, targets);
    }));
    return results.flat();
  } finally {
    await kubectl(["delete", "namespace", CHECK_NAMESPACE, "--wait=false"]);
  }
}

/** The report's lines: one summary line, then each failed probe (at most `show`). */
export function formatKubeCheck(probes: KubeProbe[], show = 20): string[] {
  const bad = probes.filter((p) => !p.ok);
  const kinds = (k: string) => probes.filter((p) => p.what.startsWith(`${k} `));
  const ok = (k: string) => kinds(k).filter((p) => p.ok).length;
  const v6 = kinds("pod6").length + kinds("vip6").length + kinds("name6").length > 0;
  const lines = [
    `services and DNS from every node's pods: ${bad.length ? `${bad.length} failed` : "all ok"} ` +
    `(DNS ${ok("dns")}/${kinds("dns").length}, pod ${ok("pod")}/${kinds("pod").length}, ` +
    `ClusterIP ${ok("vip")}/${kinds("vip").length}, ` +
    `by name ${ok("name")}/${kinds("name").length}` +
    (v6
      ? `; IPv6: pod ${ok("pod6")}/${kinds("pod6").length}, ClusterIP ${ok("vip6")}/${
        kinds("vip6").length
      }, ` +
        `by name (AAAA) ${ok("name6")}/${kinds("name6").length}`
      : "") +
    ")",
  ];
  for (const p of bad.slice(0, show)) lines.push(`  FAIL ${p.from} -> ${p.what}: ${p.detail}`);
  if (bad.length > show) lines.push(`  … and ${bad.length - show} more`);
  return lines;
}
