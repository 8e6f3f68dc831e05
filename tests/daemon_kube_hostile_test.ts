/**
 * The kube-mode daemon against a hostile API server (issue 30, "every API response is bounded"): a 200 MB
 * list (over the 128 MiB body cap), a 100 MB watch line, a list of endless `continue` pages, every watch answering 410 Gone, a watch that
 * never says anything. Through all of them the daemon stays up, its peak RSS (VmHWM) stays under 200 MiB,
 * its request rate stays bounded (backoff with jitter), and it recovers — programs the peer that appeared
 * meanwhile — once the server behaves. Before the caps, the 100 MB list alone took the daemon to ~950 MiB.
 * The daemon runs with install.sh's V8 flags (from source without them its peak was 162 MiB).
 */
import { streamed } from "./streamed_body.ts";
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { DaemonCluster, routes, type TestNode, waitFor } from "./daemon_fixture.ts";
import { FakeApiServer, kubeconfigYaml } from "./kube_fake_api.ts";
import { realisticNode } from "./kube_nodes_fixture.ts";

const P = "flannel.alpha.coreos.com/";
const MiB = 1024 * 1024;

/** The daemon's VmHWM and VmRSS in MiB (`ip netns exec` execs deno: the child's pid is the daemon's). */
async function mem(n: TestNode): Promise<{ hwm: number; rss: number }> {
  const st = await Deno.readTextFile(`/proc/${n.proc!.pid}/status`);
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(st)?.[1] ?? NaN);
  return { hwm: kb("VmHWM") / 1024, rss: kb("VmRSS") / 1024 };
}

const peerAnn = (ip: string, mac: string) => ({
  [`${P}public-ip`]: ip,
  [`${P}backend-type`]: "vxlan",
  [`${P}backend-data`]: JSON.stringify({ VNI: 1, VtepMAC: mac }),
  [`${P}kube-subnet-manager`]: "true",
});

const isList = (req: Request, u: URL) =>
  req.method === "GET" && u.pathname === "/api/v1/nodes" && !u.searchParams.has("watch");
const isWatch = (req: Request, u: URL) =>
  req.method === "GET" && u.pathname === "/api/v1/nodes" && u.searchParams.has("watch");

needsRoot.test("daemon kube: a hostile API server never takes the daemon over 200 MiB or down; it recovers", async () => {
  const c = new DaemonCluster("10.84");
  let api: FakeApiServer | null = null;
  try {
    await c.init();
    const a = await c.addNode();
    api = new FakeApiServer({ hostname: "10.84.0.1", netns: c.underlay });
    const srv = api;
    srv.upsert("kn1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] });
    await Deno.writeTextFile(
      `${c.tmp}/net-conf.json`,
      JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }),
    );
    await Deno.writeTextFile(`${c.tmp}/kubeconfig`, kubeconfigYaml(srv.url));
    const node = JSON.stringify(realisticNode(9, P, "150"));
    const since = (t: number) => srv.requests.filter((r) => r.at >= t);
    const peerRoute = async (cidr: string) => (await routes(a.ns)).some((r) => r.dst === cidr);
    const alive = () => {
      assert(a.proc, "daemon gone");
      return Deno.readTextFile(`/proc/${a.proc.pid}/status`).then(() => true, () => false);
    };

    // 1. Start against a 200 MB list (every list: the watch cache's and the consistent fallback).
    srv.intercept = (req, u) =>
      isList(req, u)
        ? new Response(
          streamed(
            `{"kind":"NodeList","metadata":{"resourceVersion":"150"},"items":[`,
            `${node},`,
            `${node}]}`,
            200 * MiB,
          ),
          { headers: { "content-type": "application/json" } },
        )
        : null;
    c.start(a, [
      "--kube-subnet-mgr",
      `--kubeconfig-file=${c.tmp}/kubeconfig`,
      `--net-config-path=${c.tmp}/net-conf.json`,
    ], {
      NODE_NAME: "kn1",
      FLANCTL_KUBE_WATCH_TIMEOUT_SECONDS: "2",
      // V8 as install.sh runs the daemon (DAEMON_V8_FLAGS): a 1 MiB young generation, no JIT.
      DENO_V8_FLAGS: "--max-semi-space-size=1,--jitless,--expose-gc",
    });
    let t = Date.now();
    await waitFor(
      "two 200 MB lists refused",
      () => since(t).filter((r) => r.url.startsWith("/api/v1/nodes?")).length >= 3,
      60_000,
    );
    assert(await alive(), a.log.join("\n"));
    assert(a.log.some((l) => l.includes("larger than 134217728 bytes")), a.log.join("\n"));
    srv.intercept = null;
    srv.upsert(
      "kn2",
      { podCIDR: "10.244.2.0/24", podCIDRs: ["10.244.2.0/24"] },
      peerAnn("10.84.0.50", "0e:00:00:00:00:02"),
    );
    await c.waitReady(a, 60_000);
    await waitFor("kn2 programmed after the list recovered", () => peerRoute("10.244.2.0/24"), 30_000);
    let m = await mem(a);
    assert(m.hwm < 200, `VmHWM ${m.hwm} MiB after the 200 MB list`);

    // 2. Every watch answers 410 and every list is endless `continue` pages: bounded requests in 10 s.
    let page = 0;
    srv.intercept = (req, u) => {
      if (isWatch(req, u)) {
        const gone = { kind: "Status", code: 410, reason: "Expired", message: "too old resource version" };
        return new Response(JSON.stringify({ type: "ERROR", object: gone }) + "\n");
      }
      if (isList(req, u)) {
        page++;
        return Response.json({
          kind: "NodeList",
          metadata: { resourceVersion: "160", continue: btoa(`page-${page}`) },
          items: [JSON.parse(node)],
        });
      }
      return null;
    };
    t = Date.now();
    srv.compact(); // ends the open watch: the next one gets 410
    await new Promise((r) => setTimeout(r, 10_000));
    const watches = since(t).filter((r) => r.url.includes("watch=")).length;
    const lists = since(t).filter((r) =>
      r.url.startsWith("/api/v1/nodes?") && !r.url.includes("watch=")
    ).length;
    assert(await alive(), a.log.join("\n"));
    // client-go's backoff (0.8 s doubling, jittered): a few cycles in 10 s (before: 274 requests); each list
    // stops at 100 pages (before: 40,321 pages in 40 s).
    assert(watches <= 5, `${watches} watch requests in 10 s`);
    assert(lists <= 3 * 100, `${lists} list requests in 10 s`);
    await waitFor("a list cut at 100 pages", () =>
      a.log.some((l) => l.includes("more than 100 pages")), 60_000);

    // 3. A 100 MB watch line: cut at the event cap, retried with backoff; a peer added meanwhile arrives.
    srv.intercept = (req, u) =>
      isWatch(req, u)
        ? new Response(
          streamed(
            `{"type":"ADDED","object":{"metadata":{"name":"x","annotations":{"a":"`,
            "a",
            `"}}}}\n`,
            100 * MiB,
          ),
        )
        : null;
    t = Date.now();
    srv.compact(); // ends the open watch: the next one gets the line
    await waitFor("two 100 MB watch lines refused", () =>
      since(t).filter((r) =>
        r.url.includes("watch=")
      ).length >= 2, 60_000);
    assert(await alive(), a.log.join("\n"));
    srv.upsert(
      "kn3",
      { podCIDR: "10.244.3.0/24", podCIDRs: ["10.244.3.0/24"] },
      peerAnn("10.84.0.51", "0e:00:00:00:00:03"),
    );
    srv.intercept = null;
    await waitFor("kn3 programmed after the watch recovered", () =>
      peerRoute("10.244.3.0/24"), 60_000);
    m = await mem(a);
    assert(m.hwm < 200, `VmHWM ${m.hwm} MiB after the 100 MB watch line`);

    // 4. Then every watch is silent (never a byte): abandoned after timeoutSeconds + margin, re-established.
    const silent: ReadableStreamDefaultController<Uint8Array>[] = [];
    srv.intercept = (req, u) =>
      isWatch(req, u)
        ? new Response(
          new ReadableStream<Uint8Array>({
            start: (ctl) =>
              void silent.push(ctl),
          }),
        )
        : null;
    srv.compact();
    await waitFor("a silent watch", () =>
      silent.length >= 1, 90_000); // after the backoff (≤ 60 s)
    t = Date.now();
    await waitFor("the silent watch abandoned and opened again", () => silent.length >= 2, 20_000);
    const gap = Date.now() - t;
    assert(gap < 15_000, `re-established after ${gap} ms`);
    assert(a.log.some((l) => l.includes("abandoned")), a.log.join("\n"));
    srv.intercept = null;
    for (const s of silent) {
      try {
        s.close();
      } catch { /* closed */ }
    }
    srv.upsert(
      "kn4",
      { podCIDR: "10.244.4.0/24", podCIDRs: ["10.244.4.0/24"] },
      peerAnn("10.84.0.52", "0e:00:00:00:00:04"),
    );
    await waitFor("kn4 programmed once the server behaves", () => peerRoute("10.244.4.0/24"), 60_000);
    m = await mem(a);
    assert(m.hwm < 200, `VmHWM ${m.hwm} MiB at the end`);
    assertEquals(await c.stop(a), 0);
    console.log(
      `hostile API: daemon VmHWM ${m.hwm.toFixed(1)} MiB, VmRSS ${
        m.rss.toFixed(1)
      } MiB; 410+continue: ${watches} watches, ${lists} list pages in 10 s`,
    );
  } finally {
    await c.close();
    await api?.close();
  }
});
