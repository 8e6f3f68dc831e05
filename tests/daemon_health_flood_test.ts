/**
 * The health server answers probes first (issue 30): while hundreds of clients keep its connection table
 * full (each reconnecting as soon as it is closed, idle or slow), 60 kubelet-style probes of /healthz —
 * each a new connection with a 1 s deadline — all get their 200.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { DaemonCluster, waitFor } from "./daemon_fixture.ts";
import { nsRun, spawnFixture } from "./netns.ts";

const WORKERS = 300;
const PROBES = 60;

needsRoot.test("daemon health port: under a connection flood every 1 s probe of /healthz succeeds", async () => {
  const c = new DaemonCluster("10.95");
  let flood: Deno.ChildProcess | null = null;
  try {
    await c.init(JSON.stringify({ Network: "10.246.0.0/16", Backend: { Type: "host-gw" } }));
    const a = await c.addNode(0);
    c.start(a, ["--resync-interval", "1"]);
    await c.waitReady(a);
    flood = spawnFixture(a.ns, "conn_churn.ts", String(a.port), String(WORKERS));
    const lines: string[] = [];
    const reading = (async () => {
      const d = new TextDecoder();
      for await (const chunk of flood!.stdout) lines.push(...d.decode(chunk).split("\n").filter(Boolean));
    })().catch(() => {});
    await waitFor("the flood running", () => lines.some((l) => l.includes("started")), 60_000);
    const failed: string[] = [], times: number[] = [];
    for (let i = 0; i < PROBES; i++) {
      const t0 = Date.now();
      const r = await nsRun(a.ns, [
        "curl",
        "-s",
        "-m",
        "1",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{time_total}",
        `http://127.0.0.1:${a.port}/healthz`,
      ]);
      const [code, secs] = r.stdout.trim().split(" ");
      times.push(Number(secs));
      if (code !== "200") failed.push(`probe ${i}: ${code || "-"} after ${Date.now() - t0} ms`);
      await new Promise((res) => setTimeout(res, 100));
    }
    await flood.stdin.close();
    await flood.status;
    await reading;
    flood = null;
    const made = JSON.parse(lines.find((l) => l.includes("connections")) ?? '{"connections":0}').connections;
    assert(made > WORKERS * 2, `the flood kept reconnecting (${made} connections)`);
    times.sort((x, y) => x - y);
    console.log(
      `${PROBES} probes under ${made} connections: p50 ${times[PROBES >> 1]} s, max ${times[PROBES - 1]} s`,
    );
    assertEquals(failed, [], `${failed.length} of ${PROBES} probes failed under ${made} connections`);
  } finally {
    if (flood) {
      try {
        flood.kill("SIGKILL");
      } catch { /* gone */ }
      await flood.status.catch(() => {});
    }
    await c.close();
  }
});
