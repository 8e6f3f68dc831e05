/**
 * Issue 35: a dual-stack `lab up --kube --ip-family dual` cluster — kube-apiserver and kube-controller-manager
 * with an IPv4 and an IPv6 service range, podCIDRs of both families, kubelets with both node IPs, kube-proxy
 * for both, flanctl's net-conf with EnableIPv6/IPv6Network. Every pod gets both families (status.podIPs and
 * flanctl's subnet.env agree with the node's podCIDRs); `lab check` reaches every node's pod by its IPv4 and
 * IPv6 address, its RequireDualStack Service by both ClusterIPs and by name through A and AAAA records, from a
 * pod on every node; two pods on different nodes ping each other over IPv6, and `lab trace` follows the path
 * between them (by name and by IPv6 address) from containerd's pod to containerd's pod.
 *
 * Needs the peers install.sh --dev builds (as tests/lab_kube_services_test.ts): without them the test is
 * skipped with a warning, and fails under CI=true.
 */
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { needsRoot } from "./root.ts";
import { TEST_PREFIX } from "./netns.ts";
import { missingKubePeers } from "./kube_peers.ts";
import { buildLabImages, flanctl, labUpKube } from "./lab_kube_helpers.ts";

const missing = missingKubePeers("lab up --kube --ip-family dual");

needsRoot.test({
  name: "lab up --kube --ip-family dual: pods of both families, Services and DNS over IPv6 from every node",
  ignore: missing.length > 0,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const name = `${TEST_PREFIX}ds${crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 5)}`
      .slice(0, 12);
    const work = await Deno.makeTempDir({ prefix: "flanctl-labds-" });
    try {
      await buildLabImages(work);
      const t0 = Date.now();
      const up = await labUpKube(name, work, "--ip-family", "dual");
      assertEquals(up.code, 0, `lab up --kube --ip-family dual:\n${up.stdout}\n${up.stderr}`);
      console.error(`  lab up --kube --ip-family dual --nodes 2: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      assertStringIncludes(up.stdout, "(net-conf: EnableIPv6, IPv6Network)");

      // Both families on every node (the API's podCIDRs = flanctl's subnet.env) and every pod.
      const st = await flanctl("lab", "status", "--name", name, "-o", "json");
      assertEquals(st.code, 0, st.stderr);
      const status = JSON.parse(st.stdout);
      assertEquals(status.ipFamily, "dual");
      for (const n of status.nodes) {
        assertEquals(n.podCIDRs.length, 2, JSON.stringify(n));
        assert(/^10\.244\.\d+\.0\/24$/.test(n.podCIDRs[0]), JSON.stringify(n));
        assert(/^fc00:244:[0-9a-f:]*\/64$/.test(n.podCIDRs[1]), JSON.stringify(n));
        assertEquals([n.subnet, n.subnetIPv6], n.podCIDRs);
      }
      const pods = status.pods.filter((p: { hostNetwork: boolean }) => !p.hostNetwork);
      assert(pods.length >= 2, st.stdout);
      for (const p of pods) {
        assertEquals(p.ips.length, 2, JSON.stringify(p));
        assert(p.ips[1].startsWith("fc00:244:"), JSON.stringify(p));
      }
      const list = await flanctl("lab", "list", "-o", "json");
      const row = JSON.parse(list.stdout).find((l: { name: string }) => l.name === name);
      assertEquals([row?.store, row?.ipFamily], ["kube", "dual"]);

      // Pods, RequireDualStack Services and DNS (A and AAAA) from a pod on every node.
      const check = await flanctl("lab", "check", "--name", name);
      assertEquals(check.code, 0, check.stdout + check.stderr);
      assertStringIncludes(
        check.stdout,
        "all ok (DNS 2/2, pod 4/4, ClusterIP 4/4, by name 4/4; IPv6: pod 4/4, ClusterIP 4/4, by name (AAAA) 4/4)",
      );

      // Two pods on different nodes ping each other over IPv6 (through flanctl's VXLAN over the IPv6 underlay).
      const made = [];
      for (const node of ["node1", "node2"]) {
        const r = await flanctl("lab", "add-pod", node, "--name", name);
        assertEquals(r.code, 0, r.stderr);
        const pod = new RegExp(`^(${node}-pod-\\S+) on ${node}`, "m").exec(r.stdout)?.[1];
        assert(pod, r.stdout);
        made.push(pod);
      }
      const kubectl = (...a: string[]) => flanctl("lab", "kubectl", "--name", name, "--", ...a);
      const v6 = async (pod: string) =>
        (await kubectl("get", "pod", pod, "-o", "jsonpath={.status.podIPs[1].ip}")).stdout.trim();
      for (const [from, to] of [[made[0], made[1]], [made[1], made[0]]]) {
        const addr = await v6(to);
        assert(/^fc00:244:[0-9a-f:]+$/.test(addr), addr);
        const ping = await kubectl(
          "exec",
          from,
          "--",
          "/bin/busybox",
          "ping",
          "-6",
          "-c",
          "3",
          "-w",
          "10",
          addr,
        );
        assertEquals(ping.code, 0, `${from} -> ${to} (${addr}):\n${ping.stdout}${ping.stderr}`);
        assertStringIncludes(ping.stdout, "3 packets received");
        // lab trace finds containerd's pods (named by the API, their namespaces by their veths), both families.
        for (const dst of [to, addr]) {
          const tr = await flanctl("lab", "trace", "--name", name, from, dst, "-o", "json");
          assertEquals(tr.code, 0, `lab trace ${from} ${dst}:\n${tr.stdout}${tr.stderr}`);
          const hops = JSON.parse(tr.stdout).hops as { step: string; detail: string }[];
          assertEquals(hops[0].step, "pod-route");
          assertEquals(hops.at(-1)?.detail, `delivered to default/${to}`);
          assert(hops.some((h) => h.step === "remote-vxlan"), tr.stdout);
        }
      }
    } finally {
      const down = await flanctl("lab", "down", "--name", name);
      await Deno.remove(work, { recursive: true }).catch(() => {});
      assertEquals(down.code, 0, down.stderr);
    }
  },
});
