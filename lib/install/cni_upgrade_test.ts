/**
 * `flanctl install-cni` as a DaemonSet rollout runs it (issue 27, issue 30): concurrent runs all succeed;
 * every foreign file it replaces is kept (numbered backups), its own plugins are told by content, not by a
 * link target's name; a conflist it replaces is kept as a copy; errors are one line without a JS stack; the
 * runtime carries the libraries the plugins dlopen; an upgrade switches the runtime while an old plugin
 * still runs and removes the old directory only once nothing runs from it.
 */
import { assert, assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { BACKUP_SUFFIX, installCni, type InstallStep } from "./cni.ts";
import { CNI_PLUGIN_NAMES } from "../cni/names.ts";
import { RUNTIME_LOCK } from "../cni/launch.ts";
import { RUNTIME_LIB_DIR } from "../os/mod.ts";
import { flanctl, ROOT } from "../../tests/netns.ts";
import { CONFLIST, withDirs } from "../../tests/install_cni_dirs.ts";

/** cni.js as install.sh bundles it, once per test run; `variant` appends a comment (another runtime hash). */
let bundled: string | null = null;
async function cniJs(dir: string, variant = ""): Promise<string> {
  if (!bundled) {
    const out = await Deno.makeTempFile({ prefix: "flanctl-cnijs-", suffix: ".js" });
    const b = await new Deno.Command(Deno.execPath(), {
      args: ["bundle", "--quiet", "--platform", "deno", "-o", out, `${ROOT}cli/cni_main.ts`],
    }).output();
    assertEquals(b.code, 0, new TextDecoder().decode(b.stderr));
    bundled = out;
    globalThis.addEventListener("unload", () => Deno.removeSync(out));
  }
  Deno.mkdirSync(dir, { recursive: true });
  const path = `${dir}/cni.js`;
  Deno.writeTextFileSync(path, Deno.readTextFileSync(bundled) + (variant ? `\n// ${variant}\n` : ""));
  return path;
}

const runtimes = (bin: string) =>
  [...Deno.readDirSync(bin)].filter((e) => e.name.startsWith(".flanctl-runtime-")).map((e) =>
    `${bin}/${e.name}`
  )
    .sort();

/** The runtime directory the launcher in `bin` runs. */
function launcherRuntime(bin: string): string {
  const m = /exec "([^"]+)\/deno"/.exec(Deno.readTextFileSync(`${bin}/flanctl`));
  assert(m, "no runtime in the launcher");
  return m[1];
}

function stackLines(stderr: string): string[] {
  return stderr.split("\n").filter((l) => /^\s+at /.test(l));
}

Deno.test("install-cni: 6 concurrent runs x 3 rounds all succeed, one runtime, no stack trace", () =>
  withDirs(async ({ root, bin, conf, src }) => {
    const failures: string[] = [];
    for (let round = 0; round < 3; round++) {
      // Rounds 0 and 1 race to create a new runtime directory (round 1: a new cni.js); round 2 finds it.
      await cniJs(`${root}/lib`, round >= 1 ? "v2" : "");
      const runs = await Promise.all(
        Array.from(
          { length: 6 },
          () =>
            flanctl(["install-cni", "--cni-bin-dir", bin, "--cni-conf-dir", conf, "--cni-conf", src], {
              env: { FLANCTL_LIBDIR: `${root}/lib` },
            }),
        ),
      );
      for (const r of runs) {
        if (r.code !== 0 || stackLines(r.stderr).length) {
          failures.push(`round ${round}: ${r.code} ${r.stderr}`);
        }
      }
    }
    assertEquals(failures, []);
    assert(Deno.statSync(`${launcherRuntime(bin)}/deno`).isFile, "the launcher's runtime is complete");
    assertEquals([...Deno.readDirSync(bin)].filter((e) => e.name.includes("tmp")), [], "no temp file left");
    for (const n of CNI_PLUGIN_NAMES) assertEquals(Deno.readLinkSync(`${bin}/${n}`), `${bin}/flanctl`);
    assertEquals(Deno.readTextFileSync(`${conf}/10-flannel.conflist`), CONFLIST);
    const o = await new Deno.Command(`${bin}/loopback`, { env: { CNI_COMMAND: "VERSION" }, stdout: "piped" })
      .output();
    assertEquals(o.code, 0);
    assertStringIncludes(new TextDecoder().decode(o.stdout), "supportedVersions");
  }));

Deno.test("install-cni: a foreign plugin linked to a file named flanctl is foreign: kept as a backup", () =>
  withDirs(async ({ root, bin, conf }) => {
    Deno.mkdirSync(`${root}/vendor`, { recursive: true });
    Deno.writeTextFileSync(`${root}/vendor/flanctl`, "#!/bin/sh\necho another vendor's flanctl\n", {
      mode: 0o755,
    });
    Deno.mkdirSync(bin, { recursive: true });
    Deno.symlinkSync(`${root}/vendor/flanctl`, `${bin}/bridge`);
    const steps = await installCni({
      binDir: bin,
      confDir: conf,
      conf: null,
      runtime: { deno: Deno.execPath(), cniJs: await cniJs(`${root}/lib`) },
    });
    const bridge = steps.find((s) => s.path === `${bin}/bridge`);
    assertEquals(bridge?.action, "replaced-foreign");
    assertEquals(Deno.readLinkSync(`${bin}/bridge${BACKUP_SUFFIX}`), `${root}/vendor/flanctl`);
    // install.sh's launcher (the host's flanctl, --link mode) is flanctl's own: no backup of those links.
    Deno.writeTextFileSync(
      `${root}/vendor/host-flanctl`,
      "#!/bin/sh\n# flanctl launcher (deno compile could not fetch its runtime here): the pinned Deno runs it.\n",
      { mode: 0o755 },
    );
    Deno.removeSync(`${bin}/loopback`);
    Deno.symlinkSync(`${root}/vendor/host-flanctl`, `${bin}/loopback`);
    const again = await installCni({
      binDir: bin,
      confDir: conf,
      conf: null,
      runtime: { deno: Deno.execPath(), cniJs: await cniJs(`${root}/lib`) },
    });
    assertEquals(again.find((s) => s.path === `${bin}/loopback`)?.action, "updated");
  }));

Deno.test("install-cni: every foreign plugin it replaces is kept (numbered backups), none twice", () =>
  withDirs(async ({ root, bin, conf }) => {
    const o = {
      binDir: bin,
      confDir: conf,
      conf: null,
      runtime: { deno: Deno.execPath(), cniJs: await cniJs(`${root}/lib`) },
    };
    Deno.mkdirSync(bin, { recursive: true });
    const foreign = (n: number) => `#!/bin/sh\necho reference bridge v${n}\n`;
    const steps: InstallStep[][] = [];
    for (const n of [1, 2, 3]) {
      // An operator (or a package upgrade) puts the reference bridge back between rollouts.
      try {
        Deno.removeSync(`${bin}/bridge`);
      } catch { /* first round: none yet */ }
      Deno.writeTextFileSync(`${bin}/bridge`, foreign(n), { mode: 0o755 });
      steps.push(await installCni(o));
    }
    assertEquals(Deno.readTextFileSync(`${bin}/bridge${BACKUP_SUFFIX}`), foreign(1));
    assertEquals(Deno.readTextFileSync(`${bin}/bridge${BACKUP_SUFFIX}.1`), foreign(2));
    assertEquals(Deno.readTextFileSync(`${bin}/bridge${BACKUP_SUFFIX}.2`), foreign(3));
    assertEquals(steps.map((s) => s.find((x) => x.path === `${bin}/bridge`)?.backup), [
      `${bin}/bridge${BACKUP_SUFFIX}`,
      `${bin}/bridge${BACKUP_SUFFIX}.1`,
      `${bin}/bridge${BACKUP_SUFFIX}.2`,
    ]);
    // The same foreign file again: its backup exists, no fourth one.
    Deno.removeSync(`${bin}/bridge`);
    Deno.writeTextFileSync(`${bin}/bridge`, foreign(2), { mode: 0o755 });
    const again = await installCni(o);
    assertEquals(again.find((s) => s.path === `${bin}/bridge`)?.backup, `${bin}/bridge${BACKUP_SUFFIX}.1`);
    assertEquals(
      [...Deno.readDirSync(bin)].filter((e) => e.name.startsWith(`bridge${BACKUP_SUFFIX}`)).length,
      3,
    );
  }));

Deno.test("install-cni: a conflist it replaces is kept as a copy", () =>
  withDirs(async ({ root, bin, conf, src }) => {
    Deno.mkdirSync(conf, { recursive: true });
    const theirs = `{"name":"operator","cniVersion":"1.0.0","plugins":[{"type":"bridge"}]}\n`;
    Deno.writeTextFileSync(`${conf}/10-flannel.conflist`, theirs);
    const o = {
      binDir: bin,
      confDir: conf,
      conf: src,
      runtime: { deno: Deno.execPath(), cniJs: await cniJs(`${root}/lib`) },
    };
    const steps = await installCni(o);
    const c = steps.find((s) => s.path === `${conf}/10-flannel.conflist`);
    assertEquals([c?.action, c?.backup], ["updated", `${conf}/10-flannel.conflist${BACKUP_SUFFIX}`]);
    assertEquals(Deno.readTextFileSync(`${conf}/10-flannel.conflist${BACKUP_SUFFIX}`), theirs);
    assertEquals(Deno.readTextFileSync(`${conf}/10-flannel.conflist`), CONFLIST);
    // The backup's name is not one libcni loads (.conf, .conflist, .json).
    assert(!/\.(conf|conflist|json)$/.test(`10-flannel.conflist${BACKUP_SUFFIX}`));
    assertEquals((await installCni(o)).filter((s) => s.action !== "unchanged"), []);
  }));

Deno.test("install-cni: a failure is one line naming the path, without a JS stack trace", () =>
  withDirs(async ({ root, bin, conf }) => {
    // A directory where a plugin name goes: it can be neither kept by a hard link nor replaced.
    Deno.mkdirSync(`${bin}/portmap/sub`, { recursive: true });
    await cniJs(`${root}/lib`);
    const r = await flanctl(["install-cni", "--cni-bin-dir", bin, "--cni-conf-dir", conf], {
      env: { FLANCTL_LIBDIR: `${root}/lib` },
    });
    assertEquals(r.code, 1, r.stderr);
    const lines = r.stderr.trim().split("\n");
    assertEquals(lines.length, 1, `more than one line:\n${r.stderr}`);
    assertStringIncludes(lines[0], "flanctl: ");
    assertStringIncludes(lines[0], `${bin}/portmap`);
    assertEquals(stackLines(r.stderr), []);
  }));

/** Whether someone holds `lock` (an exclusive try-lock fails). */
async function held(lock: string): Promise<boolean> {
  const f = await Deno.open(lock, { read: true, write: true });
  try {
    const got = await f.tryLock(true);
    return !got;
  } finally {
    f.close();
  }
}

Deno.test("install-cni: the runtime carries libnl; an upgrade keeps the old runtime until its plugin exits", () =>
  withDirs(async ({ root, bin, conf }) => {
    const v1 = { deno: Deno.execPath(), cniJs: await cniJs(`${root}/v1`, "v1") };
    const v2 = { deno: Deno.execPath(), cniJs: await cniJs(`${root}/v2`, "v2") };
    const o = { binDir: bin, confDir: conf, conf: null, retiredGraceMs: 0 };
    await installCni({ ...o, runtime: v1 });
    const old = launcherRuntime(bin);
    for (const lib of ["libnl-3.so.200", "libnl-route-3.so.200"]) {
      assert(
        Deno.statSync(`${old}/${RUNTIME_LIB_DIR}/${lib}`).size > 10_000,
        `${lib} not beside the runtime`,
      );
    }
    // An old plugin call in flight: STATUS waits for its config on stdin.
    const p = new Deno.Command(`${bin}/loopback`, {
      env: { CNI_COMMAND: "STATUS", CNI_PATH: bin },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let up = false;
    for (let i = 0; i < 200 && !up; i++) {
      up = await held(`${old}/${RUNTIME_LOCK}`);
      if (!up) await new Promise((r) => setTimeout(r, 50));
    }
    assert(up, "the plugin call never took its runtime's lock");
    const upgrade = await installCni({ ...o, runtime: v2 });
    const fresh = launcherRuntime(bin);
    assert(fresh !== old, "the launcher still runs the old runtime");
    assertEquals(
      upgrade.filter((s) => s.path === old).map((s) => s.action),
      ["retired", "kept-in-use"],
    );
    assert(Deno.statSync(`${old}/deno`).isFile, "the old runtime went while its plugin ran");
    // New calls run the new runtime meanwhile.
    const v = await new Deno.Command(`${bin}/loopback`, { env: { CNI_COMMAND: "VERSION" } }).output();
    assertEquals(v.code, 0);
    // The old call finishes from the old runtime.
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(`{"cniVersion":"1.1.0","name":"lo","type":"loopback"}`));
    await w.close();
    const out = await p.output();
    assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
    // Unused now: the next run removes it; the current one stays.
    const later = await installCni({ ...o, runtime: v2 });
    assertEquals(later.filter((s) => s.path === old).map((s) => s.action), ["removed"]);
    assertEquals(runtimes(bin), [fresh]);
    // With the default grace, a runtime just superseded is retired, not removed, even when unused.
    await installCni({ binDir: bin, confDir: conf, conf: null, runtime: v1 });
    assertEquals(runtimes(bin).length, 2);
  }));
