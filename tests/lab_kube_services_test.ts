/**
 * Issue 35: a `lab up --kube --proxy-mode nftables` cluster — kube-proxy programs its own nftables table (no
 * iptables service rules), `lab check` reaches every node's pod by address, ClusterIP and Service name from a
 * pod on every node and resolves kubernetes.default through CoreDNS; and a rollout restart of flanctl's
 * DaemonSet under a Service load (a pod on node1 asking a Service whose only backend is on node2, 5 times a
 * second, through kube-proxy) loses no request.
 *
 * Needs the peers install.sh --dev builds (Kubernetes with kube-scheduler and kube-proxy, CoreDNS), etcd,
 * containerd, busybox, mmdebstrap: without them the test is skipped with a warning, and fails under CI=true.
 */
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { needsRoot } from "./root.ts";
import { run, TEST_PREFIX } from "./netns.ts";
import { missingKubePeers } from "./kube_peers.ts";
import { buildLabImages, flanctl, labUpKube, restartFlannelDaemonSet } from "./lab_kube_helpers.ts";

const missing = missingKubePeers("lab up --kube --proxy-mode nftables");

needsRoot.test({
  name: "lab up --kube --proxy-mode nftables: Services and DNS from every node; a rollout loses no request",
  ignore: missing.length > 0,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const name = `${TEST_PREFIX}svc${crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 4)}`
      .slice(0, 12);
    const work = await Deno.makeTempDir({ prefix: "flanctl-labsvc-" });
    try {
      await buildLabImages(work);
      const t0 = Date.now();
      const up = await labUpKube(name, work, "--proxy-mode", "nftables");
      assertEquals(up.code, 0, `lab up --kube:\n${up.stdout}\n${up.stderr}`);
      console.error(
        `  lab up --kube --nodes 2 --proxy-mode nftables: ${((Date.now() - t0) / 1000).toFixed(1)} s`,
      );
      assertStringIncludes(up.stdout, "kube-proxy (nftables mode)");
      const kubectl = (...a: string[]) => flanctl("lab", "kubectl", "--name", name, "--", ...a);

      // kube-proxy's own table on every node, and no iptables service rules.
      for (let i = 1; i <= 2; i++) {
        const nft = await run([
          "ip",
          "netns",
          "exec",
          `${name}-node${i}`,
          "nft",
          "list",
          "table",
          "ip",
          "kube-proxy",
        ]);
        assertEquals(nft.code, 0, nft.stderr);
        assertStringIncludes(nft.stdout, "10.96.0.10");
        const nat = await run(["ip", "netns", "exec", `${name}-node${i}`, "iptables-save", "-t", "nat"]);
        assert(!nat.stdout.includes("KUBE-SERVICES"), nat.stdout);
      }
      const check = await flanctl("lab", "check", "--name", name);
      assertEquals(check.code, 0, check.stdout + check.stderr);
      assertStringIncludes(check.stdout, "all ok (DNS 2/2, pod 4/4, ClusterIP 4/4, by name 4/4)");

      // A Service whose only backend is on node2, asked from a pod on node1 through a rollout of flanctl.
      const server = await flanctl("lab", "add-pod", "node2", "--publish", "18081:8080", "--name", name);
      assertEquals(server.code, 0, server.stderr);
      const backend = /^(node2-pod-\S+) on node2/m.exec(server.stdout)?.[1];
      assert(backend, server.stdout);
      const svc = JSON.stringify({
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "web", namespace: "default" },
        spec: {
          selector: { "flanctl-lab": "add-pod", role: "web" },
          ports: [{ port: 80, targetPort: 8080 }],
        },
      });
      const client = await flanctl("lab", "add-pod", "node1", "--name", name);
      assertEquals(client.code, 0, client.stderr);
      const cli = /^(node1-pod-\S+) on node1/m.exec(client.stdout)?.[1];
      assert(cli, client.stdout);
      // The client is an add-pod too: the Service selects the backend by name, through its own label.
      assertEquals((await kubectl("label", "pod", backend, "role=web")).code, 0);
      Deno.writeTextFileSync(`${work}/svc.json`, svc);
      assertEquals((await kubectl("apply", "-f", `${work}/svc.json`)).code, 0);
      // By ClusterIP: busybox's nc would resolve a name through glibc, which has no NSS libraries in the image.
      const ip = (await kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}")).stdout.trim();
      assert(/^10\.96\.\d+\.\d+$/.test(ip), ip);
      const loop = "ok=0; for i in $(/bin/busybox seq 150); do " +
        `a=$(printf 'GET /etc/hostname HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 2 ${ip} 80 2>/dev/null | ` +
        "/bin/busybox tail -1); " +
        `[ "$a" = "${backend}" ] && ok=$((ok+1)); /bin/busybox sleep 0.2; done; echo "answered $ok/150"`;
      const asking = kubectl("exec", cli, "--", "/bin/busybox", "sh", "-c", loop);
      await new Promise((r) => setTimeout(r, 2000));
      await restartFlannelDaemonSet(kubectl);
      const asked = await asking;
      console.error(`  rollout restart under a Service load: ${asked.stdout.trim()}`);
      assertStringIncludes(asked.stdout, "answered 150/150");
    } finally {
      const down = await flanctl("lab", "down", "--name", name);
      await Deno.remove(work, { recursive: true }).catch(() => {});
      assertEquals(down.code, 0, down.stderr);
    }
  },
});
