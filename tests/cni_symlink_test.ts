/**
 * Symlink mode: a temp dir with symlinks named flannel, bridge, host-local and loopback pointing at a
 * launcher script that sets FLANCTL_ARGV0="$0" and execs Deno on main.ts (the shape install.sh installs);
 * each answers VERSION. Also `flanctl cni <plugin>` through the command tree, and an ADD through a symlink.
 */
import { assertEquals } from "./assert.ts";
import { flanctl, ROOT, run } from "./netns.ts";

const VERSION_JSON = {
  cniVersion: "1.1.0",
  supportedVersions: ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"],
};

Deno.test("cni symlink mode: each plugin name answers VERSION", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "flanctl-cni-bin-" });
  try {
    const launcher = `${dir}/flanctl`;
    Deno.writeTextFileSync(
      launcher,
      `#!/bin/sh\nFLANCTL_ARGV0="$0" exec "${Deno.execPath()}" run -A --no-check --quiet "${ROOT}main.ts" "$@"\n`,
      { mode: 0o755 },
    );
    for (const p of ["flannel", "bridge", "host-local", "loopback"]) {
      Deno.symlinkSync(launcher, `${dir}/${p}`);
      const r = await run([`${dir}/${p}`], { env: { CNI_COMMAND: "VERSION" }, stdin: "" });
      assertEquals([r.code, JSON.parse(r.stdout)], [0, VERSION_JSON], `${p}: ${r.stderr}`);
    }
    // A real verb through a symlink: host-local ADD/DEL in a temp data dir (no kernel state).
    const conf = JSON.stringify({
      cniVersion: "1.1.0",
      name: "symnet",
      type: "host-local",
      ipam: { type: "host-local", dataDir: `${dir}/data`, ranges: [[{ subnet: "10.93.0.0/24" }]] },
    });
    const env = { CNI_CONTAINERID: "sym1", CNI_NETNS: "/x", CNI_IFNAME: "eth0", CNI_PATH: dir };
    const add = await run([`${dir}/host-local`], { env: { ...env, CNI_COMMAND: "ADD" }, stdin: conf });
    assertEquals(JSON.parse(add.stdout).ips, [{ address: "10.93.0.2/24", gateway: "10.93.0.1" }]);
    const del = await run([`${dir}/host-local`], { env: { ...env, CNI_COMMAND: "DEL" }, stdin: conf });
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
    const launcher = `${dir}/flanctl`;
    Deno.writeTextFileSync(
      launcher,
      `#!/bin/sh\nexport DENO_DIR="${dir}/cache"\nFLANCTL_ARGV0="$0" exec "${Deno.execPath()}" run -A --no-check ` +
        `--no-config --no-lock --cached-only --quiet --no-prompt "${bundle}"\n`,
      { mode: 0o755 },
    );
    for (const p of ["flannel", "bridge", "host-local", "loopback"]) {
      Deno.symlinkSync(launcher, `${dir}/${p}`);
      const r = await run([`${dir}/${p}`], { env: { CNI_COMMAND: "VERSION" }, stdin: "" });
      assertEquals([r.code, JSON.parse(r.stdout)], [0, VERSION_JSON], `${p}: ${r.stderr}`);
    }
    const conf = JSON.stringify({
      cniVersion: "1.1.0",
      name: "bundlenet",
      type: "host-local",
      ipam: { type: "host-local", dataDir: `${dir}/data`, ranges: [[{ subnet: "10.93.1.0/24" }]] },
    });
    const env = { CNI_CONTAINERID: "bun1", CNI_NETNS: "/x", CNI_IFNAME: "eth0", CNI_PATH: dir };
    const add = await run([`${dir}/host-local`], { env: { ...env, CNI_COMMAND: "ADD" }, stdin: conf });
    assertEquals(JSON.parse(add.stdout).ips, [{ address: "10.93.1.2/24", gateway: "10.93.1.1" }], add.stderr);
    // An error: the spec JSON on stdout and exit status 1.
    const dup = await run([`${dir}/host-local`], { env: { ...env, CNI_COMMAND: "ADD" }, stdin: conf });
    assertEquals([dup.code, typeof JSON.parse(dup.stdout).code], [1, "number"], dup.stdout);
    const del = await run([`${dir}/host-local`], { env: { ...env, CNI_COMMAND: "DEL" }, stdin: conf });
    assertEquals([del.code, del.stdout], [0, ""]);
    Deno.symlinkSync(launcher, `${dir}/not-a-plugin`);
    const other = await run([`${dir}/not-a-plugin`], { env: { CNI_COMMAND: "VERSION" }, stdin: "" });
    assertEquals(other.code, 2, other.stderr);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
