/**
 * Daemon start-up memory: RSS and private (anonymous) memory of `flanctl daemon` at 0 peers, 4 s after it is
 * ready (file store, throwaway namespaces), for this checkout and for a reference revision in the same run
 * (`DAEMON_RSS_REF`, default `main`: the daemon path there parses its flags with commander), median of 3
 * alternating runs, read from /proc/<pid>/smaps_rollup. Plain `deno run` (no V8 flags) for both.
 * @module
 */
import { DaemonCluster } from "../tests/daemon_fixture.ts";
import { ROOT } from "../tests/netns.ts";

const ref = Deno.env.get("DAEMON_RSS_REF") ?? "main";
const refDir = await Deno.makeTempDir({ prefix: "flanctl-rss-ref-" });
const archive = new Deno.Command("sh", {
  args: ["-c", `git -C '${ROOT}' archive '${ref}' | tar -x -C '${refDir}'`],
  stderr: "piped",
}).outputSync();
if (!archive.success) {
  console.log(`reference ${ref}: git archive failed (${new TextDecoder().decode(archive.stderr).trim()})`);
  Deno.exit(1);
}

function rollup(pid: number): { rss: number; anon: number } {
  const t = Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`);
  const g = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(t)![1]);
  return { rss: g("Rss"), anon: g("Anonymous") };
}

const c = new DaemonCluster("10.91");
const res: Record<string, { rss: number; anon: number }[]> = { this: [], ref: [] };
try {
  await c.init(JSON.stringify({ Network: "10.240.0.0/16", Backend: { Type: "vxlan" } }));
  const n = await c.addNode();
  for (let round = 0; round < 3; round++) {
    for (const [k, root] of [["this", ROOT], ["ref", `${refDir}/`]]) {
      const p = new Deno.Command("ip", {
        args: [
          "netns",
          "exec",
          n.ns,
          Deno.execPath(),
          "run",
          "-A",
          "--no-check",
          "--quiet",
          `${root}main.ts`,
          ...c.daemonArgs(n),
        ],
        stdout: "null",
        stderr: "null",
      }).spawn();
      await c.waitReady(n);
      await new Promise((r) => setTimeout(r, 4000));
      res[k].push(rollup(p.pid)); // `ip netns exec` execs deno: same pid
      p.kill("SIGTERM");
      await p.status;
    }
  }
} finally {
  await c.close();
  await Deno.remove(refDir, { recursive: true });
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mib = (k: number) => (k / 1024).toFixed(1);
const [t, r] = [res.this, res.ref].map((x) => ({
  rss: med(x.map((y) => y.rss)),
  anon: med(x.map((y) => y.anon)),
}));
console.log(`reference (${ref}): RSS ${mib(r.rss)} MiB, anonymous ${mib(r.anon)} MiB (median of 3)`);
console.log(`this checkout:     RSS ${mib(t.rss)} MiB, anonymous ${mib(t.anon)} MiB (median of 3)`);
console.log(
  `ratio: RSS ${(t.rss / r.rss).toFixed(2)}x, anonymous ${(t.anon / r.anon).toFixed(2)}x the reference`,
);
