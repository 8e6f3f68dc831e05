/**
 * Symlink mode: a temp dir with symlinks named flannel, bridge, host-local, loopback and portmap pointing at a
 * launcher script that sets FLANCTL_ARGV0="$0" and execs Deno on main.ts (the shape install.sh installs);
 * each answers VERSION. Also `flanctl cni <plugin>` through the command tree, and an ADD through a symlink.
 */
import { assertEquals } from "../tests/assert.ts";
import { flanctl, ROOT, run } from "../tests/netns.ts";
import { CNI_DENO_RUN_FLAGS } from "../lib/cni/launch.ts";

const VERSION_JSON = {
  cniVersion: "1.1.0",
  supportedVersions: ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"],
};

const PLUGINS = ["flannel", "bridge", "host-local", "loopback", "portmap"];

/**
 * Writes `launcher` (a shell script whose last line execs Deno) into `dir`, links every plugin name to it
 * and checks that each answers VERSION. Returns the launcher's path.
 */
async function linkPlugins(dir: string, execLine: string): Promise<string> {
  const launcher = `${dir}/flanctl`;
  Deno.writeTextFileSync(launcher, `#!/bin/sh\n${execLine}\n`, { mode: 0o755 });
  for (const p of PLUGINS) {
    Deno.symlinkSync(launcher, `${dir}/${p}`);
    const r = await run([`${dir}/${p}`], { env: { CNI_COMMAND: "VERSION" }, stdin: "" });
    assertEquals([r.code, JSON.parse(r.stdout)], [0, VERSION_JSON], `${p}: ${r.stderr}`);
  }
  return launcher;
}

/** Runs `verb` of the `host-local` symlink in `dir` for network `net` on `subnet` (no kernel state). */
function hostLocal(dir: string, net: string, subnet: string, id: string, verb: "ADD" | "DEL") {
  const conf = JSON.stringify({
    cniVersion: "1.1.0",
    name: net,
    type: "host-local",
    ipam: { type: "host-local", dataDir: `${dir}/data`, ranges: [[{ subnet }]] },
  });
  const env = { CNI_CONTAINERID: id, CNI_NETNS: "/x", CNI_IFNAME: "eth0", CNI_PATH: dir, CNI_COMMAND: verb };
  return run([`${dir}/host-local`], { env, stdin: conf });
}

Deno.test("cni symlink mode: each plugin name answers VERSION", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "flanctl-cni-bin-" });
  try {
    const launcher = await linkPlugins(
      dir,
      `FLANCTL_ARGV0="$0" exec "${Deno.execPath()}" run -A --no-check --quiet "${ROOT}main.ts" "$@"`,
    );
    // A real verb through a symlink: host-local ADD/DEL in a temp data dir (no kernel state).
    const add = await hostLocal(dir, "symnet", "10.93.0.0/24", "sym1", "ADD");
    assertEquals(JSON.parse(add.stdout).ips, [{ address: "10.93.0.2/24", gateway: "10.93.0.1" }]);
    const del = await hostLocal(dir, "symnet", "10.93.0.0/24", "sym1", "DEL");
    assertEquals([del.code, del.stdout], [0, ""]);
    // An unknown name is not a plugin: flanctl's own CLI answers (and fails on the unknown verb).
    Deno.symlinkSync(launcher, `${dir}/not-a-plugin`);
    const other = await run([`${dir}/not-a-plugin`, "no-such-command"], { env: { CNI_COMMAND: "VERSION" } });
    assertEquals(other.code !== 0 && !other.stdout.includes("supportedVersions"), true);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("cni subcommand: flanctl cni <plugin> answers like the symlink", async () => {
  const r = await flanctl(["cni", "bridge"], { env: { CNI_COMMAND: "VERSION" }, stdin: "" });
  assertEquals([r.code, JSON.parse(r.stdout)], [0, VERSION_JSON], r.stderr);
  const bad = await flanctl(["cni", "nosuch"], { env: { CNI_COMMAND: "VERSION" }, stdin: "" });
  assertEquals(bad.code, 2);
  const err = await flanctl(["cni", "host-local"], { env: { CNI_COMMAND: "ADD" }, stdin: "{}" });
  assertEquals([err.code, JSON.parse(err.stdout).code], [1, 4]);
});

Deno.test("cni bundled fast path: the cni.js install.sh builds answers through the symlink names", async () => {
  // The same `deno bundle` and launcher flags as install.sh: one JavaScript file, no deno.json/lockfile.
  const dir = Deno.makeTempDirSync({ prefix: "flanctl-cni-js-" });
  try {
    const bundle = `${dir}/cni.js`;
    const b = await run([
      Deno.execPath(),
      "bundle",
      "--quiet",
      "--platform",
      "deno",
      "--minify",
      "--keep-names",
      "-o",
      bundle,
      `${ROOT}cli/cni_main.ts`,
    ]);
    assertEquals(b.code, 0, b.stderr);
    // The launchers' own flags (lib/cni/launch.ts).
    const launcher = await linkPlugins(
      dir,
      `export DENO_DIR="${dir}/cache"\nFLANCTL_ARGV0="$0" exec "${Deno.execPath()}" run ` +
        `${CNI_DENO_RUN_FLAGS.join(" ")} "${bundle}"`,
    );
    // The first run (linkPlugins' VERSION calls) stored V8's code cache of the bundle in DENO_DIR: the
    // plugin turns the event loop once before exiting, so the runtime writes it (lib/cni/launch.ts).
    const cacheFiles = [...Deno.readDirSync(`${dir}/cache`)].filter((e) =>
      e.name.startsWith("v8_code_cache")
    );
    const cached = cacheFiles.some((e) => {
      const bytes = Deno.readFileSync(`${dir}/cache/${e.name}`);
      return new TextDecoder("latin1").decode(bytes).includes(`file://${bundle}`);
    });
    assertEquals(cached, true, `no V8 code cache entry for ${bundle} in ${dir}/cache`);
    const add = await hostLocal(dir, "bundlenet", "10.93.1.0/24", "bun1", "ADD");
    assertEquals(JSON.parse(add.stdout).ips, [{ address: "10.93.1.2/24", gateway: "10.93.1.1" }], add.stderr);
    // An error: the spec JSON on stdout and exit status 1.
    const dup = await hostLocal(dir, "bundlenet", "10.93.1.0/24", "bun1", "ADD");
    assertEquals([dup.code, typeof JSON.parse(dup.stdout).code], [1, "number"], dup.stdout);
    const del = await hostLocal(dir, "bundlenet", "10.93.1.0/24", "bun1", "DEL");
    assertEquals([del.code, del.stdout], [0, ""]);
    // portmap is in the bundle: a bad mapping is refused before any kernel access (code 7).
    const pm = await run([`${dir}/portmap`], {
      env: { CNI_COMMAND: "ADD", CNI_CONTAINERID: "pm1", CNI_NETNS: "/x", CNI_IFNAME: "eth0", CNI_PATH: dir },
      stdin: JSON.stringify({
        cniVersion: "1.0.0",
        name: "n",
        type: "portmap",
        runtimeConfig: { portMappings: [{ hostPort: 0, containerPort: 80, protocol: "tcp" }] },
      }),
    });
    assertEquals([pm.code, JSON.parse(pm.stdout).code], [1, 7], pm.stdout + pm.stderr);
    Deno.symlinkSync(launcher, `${dir}/not-a-plugin`);
    const other = await run([`${dir}/not-a-plugin`], { env: { CNI_COMMAND: "VERSION" }, stdin: "" });
    assertEquals(other.code, 2, other.stderr);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
