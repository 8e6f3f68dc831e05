/**
 * The health port cannot take the daemon down: with a low fd limit (prlimit) and more idle connections
 * than the limit, the daemon stays alive, keeps reconciling (a peer that joins meanwhile gets its route),
 * closes a slowloris connection within the header timeout, and answers /healthz once the flood ends.
 */
import { needsRoot } from "./root.ts";
import { assert } from "./assert.ts";
import { DaemonCluster, routes, waitFor } from "./daemon_fixture.ts";
import { flanctlCmd, spawnFixture } from "./netns.ts";

const FD_LIMIT = 160;
const FLOOD = 400;

needsRoot.test("daemon health port: fd flood and slowloris neither kill the daemon nor stop reconciling", async () => {
  const c = new DaemonCluster("10.97");
  let flood: Deno.ChildProcess | null = null;
  try {
    await c.init(JSON.stringify({ Network: "10.247.0.0/16", Backend: { Type: "host-gw" } }));
    const a = await c.addNode(0), b = await c.addNode(0);
    // Node A runs with a low fd limit, like a daemon whose limit an attacker could exhaust.
    const cmd = [
      "prlimit",
      `--nofile=${FD_LIMIT}:${FD_LIMIT}`,
      "ip",
      "netns",
      "exec",
      a.ns,
      ...flanctlCmd(...c.daemonArgs(a, ["--resync-interval", "1"])),
    ];
    const pa = new Deno.Command(cmd[0], {
      args: cmd.slice(1),
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    })
      .spawn();
    a.proc = pa;
    let exited: number | null = null;
    pa.status.then((s) => (exited = s.code));
    (async () => {
      const d = new TextDecoder();
      for await (const chunk of pa.stderr) a.log.push(...d.decode(chunk).split("\n").filter(Boolean));
    })().catch(() => {});
    await c.waitReady(a);

    flood = spawnFixture(a.ns, "conn_flood.ts", String(a.port), String(FLOOD));
    const events: Record<string, number>[] = [];
    (async () => {
      const d = new TextDecoder();
      let buf = "";
      for await (const chunk of flood!.stdout) {
        buf += d.decode(chunk, { stream: true });
        const lines = buf.split("\n");
        buf = lines.pop()!;
        for (const l of lines) if (l.trim()) events.push(JSON.parse(l));
      }
    })().catch(() => {});
    await waitFor("the flood's connections", () => events.some((e) => "opened" in e), 60_000);

    // While the flood holds its connections: a new peer joins, and A still programs its route.
    c.start(b, ["--resync-interval", "1"]);
    await c.waitReady(b);
    const subB = await c.subnetOf(b);
    await waitFor(
      () => `A reconciles during the flood; A log:\n${a.log.slice(-20).join("\n")}`,
      async () => (await routes(a.ns)).some((r) => r.dst === subB && r.gateway === b.ip),
      30_000,
    );
    // The slowloris connection was closed by the header timeout (5 s), not held open.
    await waitFor(
      () => `slowloris closed; events ${JSON.stringify(events)}`,
      () => events.find((e) => "slowClosedMs" in e),
    );
    const slowMs = events.find((e) => "slowClosedMs" in e)!.slowClosedMs;
    assert(slowMs < 15_000, `slowloris closed after ${slowMs} ms`);
    assert(exited === null, `daemon A exited (${exited}) during the flood; log:\n${a.log.join("\n")}`);

    // The flood ends: /healthz answers again, and the daemon is still alive.
    await flood.stdin.close();
    await flood.status;
    flood = null;
    await waitFor(
      "A's /healthz after the flood",
      async () => (await c.http(a, "/healthz"))[0] === 200,
    );
    assert(exited === null, `daemon A exited (${exited}); log:\n${a.log.join("\n")}`);
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
