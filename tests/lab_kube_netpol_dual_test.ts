/**
 * Issue 36 on a dual-stack cluster: `lab up --kube --ip-family dual --network-policy`, flanctl's DaemonSet
 * enforcing. Kubernetes' Netpol e2e tests probe each pod's primary address (IPv4 first here), so this test holds
 * the IPv6 side with real pods: a server on node1 (busybox httpd on 8080, listening on both families) and a client
 * on the same node and one on node2, each probing the server's IPv4 and IPv6 address with TCP connections —
 * open without a policy; a default-deny ingress policy closes both families, same node (across cni0) and across
 * nodes; an allow policy with an IPv6 ipBlock (node2's IPv6 pod CIDR) opens exactly node2's client over IPv6;
 * adding a podSelector rule opens both clients over both families; deleting the policies opens everything.
 *
 * Needs the peers install.sh --dev builds (as tests/lab_kube_dualstack_test.ts): without them the test is
 * skipped with a warning, and fails under CI=true.
 */
import { assert, assertEquals } from "./assert.ts";
import { needsRoot } from "./root.ts";
import { ROOT, run, TEST_PREFIX } from "./netns.ts";
import { missingKubePeers } from "./kube_peers.ts";
import { buildLabImages, flanctl, labUpKube } from "./lab_kube_helpers.ts";

const missing = missingKubePeers("lab up --kube --ip-family dual --network-policy");

const BUSYBOX = "flanctl.local/pause:busybox";
const pod = (name: string, node: string, app: string, command?: string[]) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "np6", labels: { app } },
  spec: {
    nodeName: node,
    containers: [{ name: "c", image: BUSYBOX, imagePullPolicy: "Never", ...(command ? { command } : {}) }],
  },
});
const policy = (name: string, ingress?: unknown[]) => ({
  apiVersion: "networking.k8s.io/v1",
  kind: "NetworkPolicy",
  metadata: { name, namespace: "np6" },
  spec: {
    podSelector: { matchLabels: { app: "srv" } },
    policyTypes: ["Ingress"],
    ...(ingress ? { ingress } : {}),
  },
});

needsRoot.test({
  name: "lab up --kube --ip-family dual --network-policy: policies enforced over IPv6 as over IPv4",
  ignore: missing.length > 0,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const name = `${TEST_PREFIX}np${crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 5)}`
      .slice(0, 12);
    const work = await Deno.makeTempDir({ prefix: "flanctl-labnp6-" });
    try {
      await buildLabImages(work);
      const up = await labUpKube(name, work, "--ip-family", "dual", "--network-policy");
      assertEquals(up.code, 0, `lab up:\n${up.stdout}\n${up.stderr}`);
      const kubectl = (input: string | undefined, ...a: string[]) =>
        run(
          [
            Deno.execPath(),
            "run",
            "-A",
            "--no-check",
            "--quiet",
            `${ROOT}main.ts`,
            "lab",
            "kubectl",
            "--name",
            name,
            "--",
            ...a,
          ],
          input === undefined ? {} : { stdin: input },
        );
      const apply = async (...objs: unknown[]) => {
        const r = await kubectl(
          JSON.stringify({ apiVersion: "v1", kind: "List", items: objs }),
          "apply",
          "-f",
          "-",
        );
        assertEquals(r.code, 0, r.stderr);
      };
      await apply(
        { apiVersion: "v1", kind: "Namespace", metadata: { name: "np6" } },
        pod("srv", "node1", "srv", ["/bin/httpd", "-f", "-p", "8080"]),
        pod("same", "node1", "cli"),
        pod("other", "node2", "cli"),
      );
      const ready = await kubectl(
        undefined,
        "-n",
        "np6",
        "wait",
        "--for=condition=Ready",
        "pod",
        "--all",
        "--timeout=180s",
      );
      assertEquals(ready.code, 0, ready.stdout + ready.stderr);
      const ips = async (p: string) =>
        (await kubectl(undefined, "-n", "np6", "get", "pod", p, "-o", "jsonpath={.status.podIPs[*].ip}"))
          .stdout
          .trim().split(" ");
      const [srv4, srv6] = await ips("srv");
      assert(/^10\.244\.\d+\.\d+$/.test(srv4) && /^fc00:244:/.test(srv6), `${srv4} ${srv6}`);
      // node2's IPv6 pod CIDR (the API's), for an ipBlock that holds the client there over IPv6 only.
      const n2v6 = (await kubectl(undefined, "get", "node", "node2", "-o", "jsonpath={.spec.podCIDRs[1]}"))
        .stdout
        .trim();
      assert(/^fc00:244:[0-9a-f:]*\/64$/.test(n2v6), n2v6);
      // One TCP connection (an HTTP request httpd answers and closes) from each client to each address.
      const grid = async () => {
        const out: string[] = [];
        for (const from of ["same", "other"]) {
          for (const [fam, addr] of [["v4", srv4], ["v6", srv6]]) {
            const r = await kubectl(
              undefined,
              "-n",
              "np6",
              "exec",
              from,
              "--",
              "/bin/sh",
              "-c",
              `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${addr} 8080`,
            );
            out.push(`${from} ${fam} ${r.code === 0 && r.stdout.includes("HTTP/1.") ? "ok" : "denied"}`);
          }
        }
        return out.join(", ");
      };
      // Enforcement follows the watch: retry a few times for the new verdicts to land.
      const expect = async (what: string, want: string) => {
        let got = "";
        for (let i = 0; i < 10 && got !== want; i++) {
          if (i) await new Promise((r) => setTimeout(r, 1000));
          got = await grid();
        }
        assertEquals(got, want, what);
      };
      await expect("no policy: open", "same v4 ok, same v6 ok, other v4 ok, other v6 ok");
      await apply(policy("deny"));
      await expect(
        "default-deny ingress",
        "same v4 denied, same v6 denied, other v4 denied, other v6 denied",
      );
      await apply(policy("v6block", [{ from: [{ ipBlock: { cidr: n2v6 } }] }]));
      await expect(`ipBlock ${n2v6}`, "same v4 denied, same v6 denied, other v4 denied, other v6 ok");
      await apply(policy("clients", [{ from: [{ podSelector: { matchLabels: { app: "cli" } } }] }]));
      await expect("podSelector app=cli", "same v4 ok, same v6 ok, other v4 ok, other v6 ok");
      const del = await kubectl(undefined, "-n", "np6", "delete", "networkpolicy", "clients", "v6block");
      assertEquals(del.code, 0, del.stderr);
      await expect(
        "back to default-deny",
        "same v4 denied, same v6 denied, other v4 denied, other v6 denied",
      );
      const del2 = await kubectl(undefined, "-n", "np6", "delete", "networkpolicy", "deny");
      assertEquals(del2.code, 0, del2.stderr);
      await expect("policies deleted: open", "same v4 ok, same v6 ok, other v4 ok, other v6 ok");
    } finally {
      const down = await flanctl("lab", "down", "--name", name);
      await Deno.remove(work, { recursive: true }).catch(() => {});
      assertEquals(down.code, 0, down.stderr);
    }
  },
});
