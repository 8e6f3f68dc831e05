/**
 * `flanctl daemon --network-policy` against the fake API server (which here also serves pods, namespaces
 * and networkpolicies, with watch streams the test writes to), two vxlan nodes with a pod each and real
 * TCP traffic from B's pod to A's: without the flag the daemon asks nothing of those kinds and makes no
 * table; with it, A enforces the policy, re-evaluates a label change from the watch, repairs `nft flush
 * ruleset`, and keeps its table through a restart (the pod stays closed while the daemon is down).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { DaemonCluster, waitFor } from "./daemon_fixture.ts";
import { FakeApiServer, kubeconfigYaml } from "./kube_fake_api.ts";
import { flanctlCmd, nsRun } from "./netns.ts";
import { KINDS, NetpolKinds, nsJson, podJson, policyJson } from "./netpol_fixture.ts";

const SERVER = `
import socket, threading
def serve(p):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", p)); s.listen(16)
    while True:
        c, _ = s.accept(); c.close()
for p in (8080, 8081):
    threading.Thread(target=serve, args=(p,), daemon=True).start()
threading.Event().wait()
`;

needsRoot.test("daemon --network-policy: off asks and makes nothing; on enforces, follows the watch, repairs, survives a restart", async () => {
  const c = new DaemonCluster("10.94");
  let api: FakeApiServer | null = null;
  const kinds = new NetpolKinds();
  let server: Deno.ChildProcess | null = null;
  try {
    await c.init();
    const a = await c.addNode(), b = await c.addNode();
    api = new FakeApiServer({ hostname: "10.94.0.1", netns: c.underlay });
    api.intercept = kinds.handle;
    api.upsert("kn1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] });
    api.upsert("kn2", { podCIDR: "10.244.2.0/24", podCIDRs: ["10.244.2.0/24"] });
    await Deno.writeTextFile(`${c.tmp}/net-conf.json`, JSON.stringify({ Network: "10.244.0.0/16" }));
    await Deno.writeTextFile(`${c.tmp}/kubeconfig`, kubeconfigYaml(api.url));
    const args = (extra: string[] = []) => [
      "--ip-masq",
      "--kube-subnet-mgr",
      `--kubeconfig-file=${c.tmp}/kubeconfig`,
      `--net-config-path=${c.tmp}/net-conf.json`,
      "--iptables-resync=1",
      ...extra,
    ];
    c.start(a, args(), { NODE_NAME: "kn1" });
    c.start(b, args(), { NODE_NAME: "kn2" });
    await c.waitReady(a);
    await c.waitReady(b);
    const why = () => `A:\n${a.log.join("\n")}`;
    const table = async () =>
      (await nsRun(a.ns, ["nft", "list", "table", "inet", "flanctl-netpol"])).code === 0;

    // Off: nothing of the three kinds asked for, no table (the daemon ran a few resyncs meanwhile).
    const pa = await c.addPod(a), pb = await c.addPod(b);
    await new Promise((r) => setTimeout(r, 3000));
    assert(kinds.seen.length === 0, `without --network-policy no such request: ${kinds.seen.join(" ")}`);
    assert(!(await table()), "without --network-policy no table");

    server = new Deno.Command("ip", {
      args: ["netns", "exec", pa.ns, "python3", "-c", SERVER],
      stdout: "null",
      stderr: "null",
    }).spawn();
    const probe = async (port: number) =>
      (await nsRun(pb.ns, ["timeout", "3", "nc", "-z", "-w", "2", pa.ip, String(port)])).code === 0;
    await waitFor("A's pod serves (no policy)", () => probe(8080));

    // On: B's pod (app=other) may reach A's pods only when labelled app=allowed, on 8080.
    kinds.objs.set(KINDS[0], [
      podJson("x", "pa", { labels: { app: "web" }, ips: [pa.ip], node: "kn1" }),
      podJson("y", "pb", { labels: { app: "other" }, ips: [pb.ip], node: "kn2" }),
    ]);
    kinds.objs.set(KINDS[1], [nsJson("x"), nsJson("y")]);
    kinds.objs.set(KINDS[2], [policyJson("x", "web", {
      podSelector: { matchLabels: { app: "web" } },
      ingress: [{
        from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: "allowed" } } }],
        ports: [{ port: 8080 }],
      }],
    })]);
    assertEquals(await c.stop(a), 0);
    c.start(a, args(["--network-policy"]), { NODE_NAME: "kn1" });
    await c.waitReady(a);
    await waitFor(() => `A enforcing\n${why()}`, () => a.log.some((l) => l.includes("netpol: enforcing")));
    assert(await table(), why());
    assert(kinds.seen.includes("/api/v1/pods?limit=500&resourceVersion=0"), kinds.seen.join("\n"));
    assertEquals(await probe(8080), false, "pb is not app=allowed");

    // The label changes: the watch's MODIFIED lets pb in on 8080, not on 8081.
    await waitFor("three watches open", () => [...kinds.streams.values()].every((s) => s.size > 0));
    kinds.send(
      KINDS[0],
      "MODIFIED",
      podJson("y", "pb", { labels: { app: "allowed" }, ips: [pb.ip], node: "kn2" }),
    );
    await waitFor(() => `pb allowed after the label change\n${why()}`, () => probe(8080));
    assertEquals(await probe(8081), false);
    // /metrics: the drops at x/pa count for the policy that isolates it.
    const drops = async () => {
      const m = /flanctl_netpol_dropped_packets_total\{policy="x\/web",direction="ingress"\} (\d+)/.exec(
        (await c.http(a, "/metrics"))[1],
      );
      return m ? Number(m[1]) : -1;
    };
    await waitFor(() => `drops counted on /metrics\n${why()}`, async () => (await drops()) > 0);
    assert((await c.http(a, "/metrics"))[1].includes("flanctl_netpol_enforcing 1"));

    // nft flush ruleset: the daemon puts its table back (--iptables-resync=1).
    await nsRun(a.ns, ["nft", "flush", "ruleset"]);
    await waitFor(() => `the table repaired\n${why()}`, table);
    assertEquals(await probe(8081), false, "closed again after the repair");
    await waitFor("pb still allowed on 8080", () => probe(8080));

    // A restart: the table stays while the daemon is down; the new daemon replaces it after its lists.
    assertEquals(await c.stop(a), 0);
    assert(await table(), "the table outlives the daemon");
    assertEquals(await probe(8081), false, "closed while the daemon is down");
    // doctor's netpol check: the table matches the API; an entry deleted by hand is drift.
    const doctor = async () => {
      const r = await nsRun(a.ns, [
        ...flanctlCmd("doctor", "-o", "json", `--subnet-file=${a.subnetFile}`, ...args().slice(1, 4)),
      ]);
      const rep = JSON.parse(r.stdout) as { checks: { id: string; severity: string; detail: string }[] };
      return rep.checks.find((x) => x.id === "netpol")!;
    };
    const before = await doctor();
    assertEquals(before.severity, "ok", before.detail);
    assert(before.detail.includes("matches the API"), before.detail);
    await nsRun(a.ns, ["nft", "delete", "element", "inet", "flanctl-netpol", "in4", `{ ${pa.ip} }`]);
    const drifted = await doctor();
    assertEquals(drifted.severity, "warning", drifted.detail);
    assert(drifted.detail.includes(`in4 ${pa.ip} should go to`), drifted.detail);
    c.start(a, args(["--network-policy"]), { NODE_NAME: "kn1" });
    await c.waitReady(a);
    await waitFor(
      () => `A enforcing again\n${why()}`,
      () => a.log.some((l) => l.includes("netpol: enforcing")),
    );
    assertEquals([await probe(8080), await probe(8081)], [true, false]);
    assertEquals((await doctor()).severity, "ok", "the new daemon's table matches the API again");

    // The policy deleted: open.
    await waitFor("three watches open again", () => [...kinds.streams.values()].every((s) => s.size > 1));
    kinds.send(KINDS[2], "DELETED", kinds.objs.get(KINDS[2])![0]);
    await waitFor(() => `open after the policy's deletion\n${why()}`, () => probe(8081));

    // flanctl reset (a rollback to flanneld) takes the table with it: its rules would go stale.
    assertEquals(await c.stop(a), 0);
    const reset = await nsRun(
      a.ns,
      flanctlCmd("reset", "--subnet-file", a.subnetFile, "--state-dir", a.stateDir),
    );
    assertEquals(reset.code, 0, reset.stderr);
    assert(reset.stdout.includes("rules inet flanctl-netpol"), reset.stdout);
    assert(!(await table()), "reset removes the table");
  } finally {
    try {
      server?.kill("SIGKILL");
      await server?.status;
    } catch { /* gone */ }
    kinds.close();
    await c.close();
    await api?.close();
  }
});
