/**
 * Daemon start-up memory: RSS and private (anonymous) memory of `flanctl daemon` at 0 peers, 4 s after it is
 * ready (file store, throwaway namespaces), for this checkout and for a reference revision in the same run
 * (`DAEMON_RSS_REF`, default `main`: the daemon path there parses its flags with commander), median of 3
 * alternating runs, read from /proc/<pid>/smaps_rollup. Plain `deno run` (no V8 flags) for both; a third
 * variant runs this checkout's daemon bundled as install.sh installs it (daemon.js, cli/daemon_entry.ts).
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

const bundle = `${refDir}/daemon.js`;
const bundled = new Deno.Command(Deno.execPath(), {
  args: [
    "bundle",
    "--quiet",
    "--platform",
    "deno",
    "--minify",
    "--keep-names",
    "-o",
    bundle,
    `${ROOT}cli/daemon_entry.ts`,
  ],
}).outputSync();
if (!bundled.success) {
  console.log("deno bundle of cli/daemon_entry.ts failed");
  Deno.exit(1);
}
const c = new DaemonCluster("10.91");
const res: Record<string, { rss: number; anon: number }[]> = { this: [], ref: [], bundle: [] };
try {
  await c.init(JSON.stringify({ Network: "10.240.0.0/16", Backend: { Type: "vxlan" } }));
  const n = await c.addNode();
  for (let round = 0; round < 3; round++) {
    for (const [k, root] of [["this", ROOT], ["ref", `${refDir}/`], ["bundle", ""]]) {
      const entry = k === "bundle" ? ["--no-config", "--no-lock", bundle] : [`${root}main.ts`];
      const args = k === "bundle" ? c.daemonArgs(n).slice(1) : c.daemonArgs(n);
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
          ...entry,
          ...args,
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
const [t, r, bu] = [res.this, res.ref, res.bundle].map((x) => ({
  rss: med(x.map((y) => y.rss)),
  anon: med(x.map((y) => y.anon)),
}));
console.log(`reference (${ref}): RSS ${mib(r.rss)} MiB, anonymous ${mib(r.anon)} MiB (median of 3)`);
console.log(`this checkout:     RSS ${mib(t.rss)} MiB, anonymous ${mib(t.anon)} MiB (median of 3)`);
console.log(
  `ratio: RSS ${(t.rss / r.rss).toFixed(2)}x, anonymous ${(t.anon / r.anon).toFixed(2)}x the reference`,
);
console.log(
  `this, bundled:     RSS ${mib(bu.rss)} MiB, anonymous ${mib(bu.anon)} MiB (daemon.js as installed)`,
);
console.log(`bundle gain: RSS ${mib(t.rss - bu.rss)} MiB, anonymous ${mib(t.anon - bu.anon)} MiB`);
