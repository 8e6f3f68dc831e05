/**
 * `flanctl daemon` with the alloc and extension backends over the file store: subnet.env written, no
 * device and no peer route; extension's commands run without a shell with flanneld's environment and stdin
 * (PreStartupCommand's output is the lease's BackendData and reaches the other node's SubnetAddCommand on
 * stdin; a revoked lease runs SubnetRemoveCommand); a failing PreStartupCommand stops the daemon.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, routes, runDaemonOnce, type TestNode, waitFor } from "./daemon_fixture.ts";
import { flanctl, linkNames } from "./netns.ts";
import { events, extensionConf, hook, postEnv } from "./alloc_ext_fixture.ts";

/**
 * `doctor` (CNI config and plugins aside: the test installs none) finds nothing wrong and `status` shows
 * the backend with no peer missing: a backend without a data plane is expected to program nothing.
 * neigh-gc reads the host-wide neighbour table, which the tests running beside this one fill: it is skipped
 * here and proven by its own tests (lib/doctor/checks/neigh_test.ts, tests/doctor_kernel_test.ts). The CNI
 * paths are the node's own (empty) directories and no CRI runtime is asked: the host's defaults
 * (/var/lib/cni, a host containerd's socket, its `cni-*` namespaces) hold what other tests and programs
 * leave there.
 */
async function noFalseProblems(c: DaemonCluster, n: TestNode, type: string): Promise<void> {
  const files = ["--subnet-file", n.subnetFile, "--store-dir", c.storeDir];
  const cni = `${n.dir}/cni`;
  const dr = await flanctl([
    "doctor",
    "--netns",
    n.ns,
    ...files,
    "--cni-conf-dir",
    `${cni}/net.d`,
    "--cni-bin-dir",
    `${cni}/bin`,
    "--cni-data-dir",
    `${cni}/networks`,
    "--flannel-data-dir",
    `${cni}/flannel`,
    "--cni-results-dir",
    `${cni}/results`,
    "--pod-netns-prefix",
    `${n.ns}-pod-`,
    "--cri-socket",
    "none",
    "--readyz-url",
    `http://127.0.0.1:${n.port}/readyz`,
    "--skip",
    "cni-config,cni-binaries,neigh-gc",
    "--problems",
  ]);
  assertEquals(dr.code, 0, dr.stdout + dr.stderr);
  const st = await flanctl(["status", "--netns", n.ns, ...files]);
  assertEquals(st.code, 0, st.stdout + st.stderr);
  assertStringIncludes(st.stdout, `backend    ${type}, device eth0 up, mtu 1500`);
  assertStringIncludes(st.stdout, "peers      1 leases: 0 programmed, 0 missing, 0 stale; daemon programs 0");
  if (type === "extension") {
    assertStringIncludes(
      st.stdout,
      "commands   PreStartupCommand 1 ok; PostStartupCommand 1 ok; SubnetAddCommand 1 ok\n",
    );
  } else assert(!st.stdout.includes("commands"), st.stdout);
}

/** Links of `ns` other than lo and eth0 (a backend without a data plane makes none). */
async function extraLinks(ns: string): Promise<string[]> {
  return (await linkNames(ns)).filter((x) => x !== "lo" && x !== "eth0");
}

needsRoot.test("daemon alloc: leases and subnet.env only, no device, no peer route", async () => {
  const c = new DaemonCluster("10.98");
  try {
    await c.init(JSON.stringify({ Network: "10.246.0.0/16", Backend: { Type: "alloc" } }));
    const a = await c.addNode(), b = await c.addNode();
    for (const n of [a, b]) c.start(n, ["--resync-interval", "1"]);
    for (const n of [a, b]) await c.waitReady(n);
    const env = await c.subnetEnv(a);
    assertEquals([env.FLANNEL_NETWORK, env.FLANNEL_MTU, env.FLANNEL_IPMASQ], [
      "10.246.0.0/16",
      "1500",
      "false",
    ]);
    const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
    assert(subA !== subB);
    // flanneld's alloc lease: PublicIP only (no BackendType, no BackendData).
    const file = `${c.storeDir}/subnets/${subB.replace("/", "-")}`;
    assertEquals(JSON.parse(await Deno.readTextFile(file)).lease, { PublicIP: b.ip, PublicIPv6: null });
    await waitFor(
      "both leases seen",
      async () => (await c.http(a, "/metrics"))[1].includes("\nflanctl_leases 2\n"),
    );
    const [, metrics] = await c.http(a, "/metrics");
    assertStringIncludes(metrics, "\nflanctl_peers 0\n");
    assertStringIncludes(metrics, "flanctl_rejected_peers_total{");
    assert(!/flanctl_rejected_peers_total\{[^}]*\} [1-9]/.test(metrics), metrics);
    assertEquals(await extraLinks(a.ns), []);
    assert(!(await routes(a.ns)).some((r) => r.dst === subB), "no route to the other node's subnet");
    await noFalseProblems(c, a, "alloc");
  } finally {
    await c.close();
  }
});

needsRoot.test({
  name: "daemon extension: the commands run with flanneld's env and stdin; add, remove; no device",
  async fn() {
    const c = new DaemonCluster("10.97");
    try {
      await c.init();
      await Deno.writeTextFile(
        `${c.storeDir}/config`,
        JSON.stringify(await extensionConf(c.tmp, "10.247.0.0/16")),
      );
      const a = await c.addNode(), b = await c.addNode();
      for (const n of [a, b]) c.start(n, ["--resync-interval", "1"], { EXT_NODE: n.name, OUT_DIR: n.dir });
      for (const n of [a, b]) await c.waitReady(n);
      const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
      assertEquals((await c.subnetEnv(a)).FLANNEL_MTU, "1500");
      // PostStartupCommand: flanneld's five variables, and the daemon's own environment.
      const env = await postEnv(a);
      assertEquals(
        [env.NETWORK, env.SUBNET, env.PUBLIC_IP, env.IPV6SUBNET, env.PUBLIC_IPV6, env.EXT_NODE],
        ["10.247.0.0/16", subA, a.ip, "::/0", "<nil>", "node1"],
      );
      // Each node's SubnetAddCommand ran for the other's lease, with its BackendData (PreStartupCommand's
      // trimmed output) on stdin.
      await waitFor(
        c.explain("A's add for B"),
        async () => (await events(a)).includes(`add|${subB}|${b.ip}|data of node2`),
      );
      await waitFor(
        c.explain("B's add for A"),
        async () => (await events(b)).includes(`add|${subA}|${a.ip}|data of node1`),
      );
      assertEquals(await extraLinks(a.ns), []);
      assert(!(await routes(a.ns)).some((r) => r.dst === subB), "no route to the other node's subnet");
      // Our own lease never runs a command (flanneld's LeaseWatcher leaves it out).
      assert(!(await events(a)).some((l) => l.includes(`|${subA}|`)), (await events(a)).join("\n"));
      await noFalseProblems(c, a, "extension");
      // B's lease revoked: A runs SubnetRemoveCommand with the last known lease.
      const r = await flanctl(["lease", "revoke", subB, "--store-dir", c.storeDir]);
      assertEquals(r.code, 0, r.stderr);
      await waitFor(
        c.explain("A's remove for B"),
        async () => (await events(a)).includes(`del|${subB}|${b.ip}|data of node2`),
      );
      const [, metrics] = await c.http(a, "/metrics");
      assertStringIncludes(
        metrics,
        'flanctl_extension_commands_total{command="SubnetRemoveCommand",result="ok"} 1',
      );
      assertStringIncludes(
        metrics,
        'flanctl_extension_commands_total{command="PostStartupCommand",result="ok"} 1',
      );
    } finally {
      await c.close();
    }
  },
});

needsRoot.test("daemon extension: a failing PreStartupCommand stops the start, reported as flanneld does", async () => {
  const c = new DaemonCluster("10.96");
  try {
    await c.init();
    const pre = await hook(`${c.tmp}/pre`, "echo no key here >&2; exit 2");
    await Deno.writeTextFile(
      `${c.storeDir}/config`,
      JSON.stringify({ Network: "10.248.0.0/16", Backend: { Type: "extension", PreStartupCommand: pre } }),
    );
    const a = await c.addNode();
    const r = await runDaemonOnce(a.ns, c.daemonArgs(a));
    assertEquals(r.code, 1, r.stderr);
    assertStringIncludes(
      r.stderr,
      `PreStartupCommand: failed to run command: ${pre} Err: exit status 2 Output: no key here`,
    );
    assertEquals(await Deno.stat(a.subnetFile).then(() => true, () => false), false, "no subnet.env");
  } finally {
    await c.close();
  }
});
