/**
 * CNI stdin is read with a cap (lib/cni/skel.ts MAX_STDIN_BYTES, 16 MiB): a huge config (valid JSON of
 * 17 MiB) and an endless-looking one (256 MiB of /dev/zero, 16 times the cap) are refused with the spec's
 * error JSON, code 5, naming the limit; the plugin stops reading at the cap (exits while the writer still
 * has data), and nothing is made in the pod's netns. Plugins run inside a node netns of their own.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { cniEnv, pluginCmd } from "./cni_helpers.ts";
import { nsRun, run, withNetns } from "./netns.ts";

/** The network config; IPAM state (if a broken cap ever let the ADD through) stays in the test's `dir`. */
const confIn = (dir: string) => ({
  cniVersion: "1.0.0",
  name: "capnet",
  type: "bridge",
  bridge: "capbr0",
  ipam: { type: "host-local", subnet: "10.251.0.0/24", dataDir: `${dir}/ipam` },
});

function assertCapError(stdout: string): void {
  const j = JSON.parse(stdout);
  assertEquals(j.code, 5, stdout);
  assertEquals(j.msg, "stdin too large");
  assertStringIncludes(j.details, "16777216 bytes");
  assertStringIncludes(j.details, "16 MiB");
}

/** Runs our bridge plugin in `node` with stdin from the shell pipeline `source`; both exit codes. */
async function piped(node: string, pod: string, dir: string, source: string) {
  const env = Object.entries(
    cniEnv({ plugin: "bridge", command: "ADD", netns: pod, containerId: "cap1", conf: confIn(dir) }),
  )
    .map(([k, v]) => `${k}=${v}`);
  const plugin = [
    "nsenter",
    `--net=/var/run/netns/${node}`,
    "env",
    "-i",
    `PATH=${Deno.env.get("PATH") ?? "/usr/bin:/bin"}`,
    "FLANCTL_ARGV0=bridge",
    ...env,
    ...pluginCmd(),
  ].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" ");
  const r = await run([
    "timeout",
    "-s",
    "KILL",
    "120",
    "bash",
    "-c",
    `${source} | ${plugin}; echo "rc=\${PIPESTATUS[0]},\${PIPESTATUS[1]}" >&2`,
  ]);
  const m = /rc=(\d+),(\d+)/.exec(r.stderr);
  assert(m, `the pipeline finished (not killed by the timeout): ${r.stderr}`);
  return { source: Number(m[1]), plugin: Number(m[2]), stdout: r.stdout, stderr: r.stderr };
}

needsRoot.test("cni stdin: a 17 MiB config and 256 MiB of /dev/zero are refused with code 5 naming the cap", () =>
  withNetns(async (fx) => {
    const node = await fx.add("scn"), pod = await fx.add("scp");
    const dir = Deno.makeTempDirSync({ prefix: "flanctl-cap-" });
    try {
      // Valid JSON, 17 MiB: the padding key is one the plugin would ignore, so only the cap refuses it.
      Deno.writeTextFileSync(
        `${dir}/huge.json`,
        JSON.stringify({ ...confIn(dir), pad: "x".repeat(17 * 1024 * 1024) }),
      );
      // 256 MiB of zeros (16 times the cap): the plugin exits after 16 MiB, so `head` gets EPIPE.
      for (const source of [`cat '${dir}/huge.json'`, "head -c 268435456 /dev/zero"]) {
        const r = await piped(node, pod, dir, source);
        assertEquals(r.plugin, 1, `${source}: ${r.stderr}`);
        assertCapError(r.stdout);
        assert(r.source !== 0, `${source} was cut off by the plugin's exit (EPIPE), exit ${r.source}`);
        // Nothing made: no eth0 in the pod, no bridge on the node.
        assertEquals((await nsRun(pod, ["ip", "link", "show", "eth0"])).code, 1, "no eth0 in the pod");
        assertEquals((await nsRun(node, ["ip", "link", "show", "capbr0"])).code, 1, "no bridge on the node");
      }
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  }));
