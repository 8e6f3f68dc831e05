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
import { nsRun } from "./netns.ts";
import { type Json, nsJson, podJson, policyJson } from "./netpol_fixture.ts";

const KINDS = ["/api/v1/pods", "/api/v1/namespaces", "/apis/networking.k8s.io/v1/networkpolicies"];

/** The three kinds the fake API server serves beside its Nodes: lists and watch streams. */
class NetpolKinds {
  objs = new Map<string, Json[]>(KINDS.map((k) => [k, []]));
  streams = new Map<string, Set<ReadableStreamDefaultController<Uint8Array>>>(
    KINDS.map((k) => [k, new Set()]),
  );
  rv = 1000;
  seen: string[] = [];

  handle = (_req: Request, u: URL): Response | null => {
    if (!KINDS.includes(u.pathname)) return null;
    this.seen.push(u.pathname + u.search);
    if (u.searchParams.get("watch") === "true") {
      const set = this.streams.get(u.pathname)!;
      return new Response(new ReadableStream<Uint8Array>({ start: (c) => void set.add(c) }));
    }
    return Response.json({
      metadata: { resourceVersion: String(this.rv) },
      items: this.objs.get(u.pathname),
    });
  };

  /** Sets (replacing by namespace/name) or deletes an object and streams the event. */
  send(kind: string, type: "ADDED" | "MODIFIED" | "DELETED", obj: Json): void {
    const md = obj.metadata as Json;
    (md as Json).resourceVersion = String(++this.rv);
    const list = this.objs.get(kind)!;
    const same = (o: Json) =>
      (o.metadata as Json).name === md.name && (o.metadata as Json).namespace === md.namespace;
    const kept = list.filter((o) => !same(o));
    this.objs.set(kind, type === "DELETED" ? kept : [...kept, obj]);
    const line = new TextEncoder().encode(JSON.stringify({ type, object: obj }) + "\n");
    for (const c of this.streams.get(kind)!) {
      try {
        c.enqueue(line);
      } catch { /* closed */ }
    }
  }

  close(): void {
    for (const s of this.streams.values()) {
      for (const c of s) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    }
  }
}

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

    // nft flush ruleset: the daemon puts its table back (--iptables-resync=1).
    await nsRun(a.ns, ["nft", "flush", "ruleset"]);
    await waitFor(() => `the table repaired\n${why()}`, table);
    assertEquals(await probe(8081), false, "closed again after the repair");
    await waitFor("pb still allowed on 8080", () => probe(8080));

    // A restart: the table stays while the daemon is down; the new daemon replaces it after its lists.
    assertEquals(await c.stop(a), 0);
    assert(await table(), "the table outlives the daemon");
    assertEquals(await probe(8081), false, "closed while the daemon is down");
    c.start(a, args(["--network-policy"]), { NODE_NAME: "kn1" });
    await c.waitReady(a);
    await waitFor(
      () => `A enforcing again\n${why()}`,
      () => a.log.some((l) => l.includes("netpol: enforcing")),
    );
    assertEquals([await probe(8080), await probe(8081)], [true, false]);

    // The policy deleted: open.
    await waitFor("three watches open again", () => [...kinds.streams.values()].every((s) => s.size > 1));
    kinds.send(KINDS[2], "DELETED", kinds.objs.get(KINDS[2])![0]);
    await waitFor(() => `open after the policy's deletion\n${why()}`, () => probe(8081));
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
