/**
 * `flanctl install-cni` into temp dirs: files and modes, idempotence, foreign plugins kept as backups and
 * reported, and atomicity: while it replaces the binary again and again, concurrent execs of a plugin name
 * never fail and concurrent reads never see a partial file.
 */
import { assert, assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { BACKUP_SUFFIX, INSTALL_LOCK, installCni } from "./cni.ts";
import { hasCodeCache } from "./code_cache.ts";
import { CNI_PLUGIN_NAMES } from "../cni/names.ts";
import { PLUGINS } from "../cni/plugins.ts";
import { flanctl, flanctlCmd, ROOT, run } from "../../tests/netns.ts";
import { CONFLIST, withDirs } from "../../tests/install_cni_dirs.ts";

/** An executable (a copy of `true`) padded to `mb` MiB with `fill` bytes: still runs, and its hash is unique. */
function fakeBinary(path: string, mb: number, fill: number): void {
  const t = Deno.readFileSync(Deno.statSync("/usr/bin/true").isFile ? "/usr/bin/true" : "/bin/true");
  const out = new Uint8Array(t.length + mb * 1024 * 1024).fill(fill);
  out.set(t);
  Deno.writeFileSync(path, out, { mode: 0o755 });
}

async function sha(data: Uint8Array): Promise<string> {
  return Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>)))
    .map((b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("install-cni: one list of plugin names, the one the binary dispatches on", () => {
  assertEquals([...CNI_PLUGIN_NAMES].sort(), Object.keys(PLUGINS).sort());
});

Deno.test("install-cni: binary, plugin symlinks and conflist with their modes; idempotent", () =>
  withDirs(async ({ root, bin, conf, src }) => {
    fakeBinary(`${root}/flanctl-v1`, 1, 1);
    const o = { binDir: bin, confDir: conf, conf: src, source: `${root}/flanctl-v1` };
    const first = await installCni(o);
    assertEquals(first.map((s) => [s.path.slice(root.length), s.action]), [
      ["/opt/cni/bin/flanctl", "installed"],
      ...CNI_PLUGIN_NAMES.map((n) => [`/opt/cni/bin/${n}`, "installed"]),
      ["/etc/cni/net.d/10-flannel.conflist", "installed"],
    ]);
    assertEquals(Deno.statSync(`${bin}/flanctl`).mode! & 0o777, 0o755);
    assertEquals(
      await sha(Deno.readFileSync(`${bin}/flanctl`)),
      await sha(Deno.readFileSync(`${root}/flanctl-v1`)),
    );
    for (const n of CNI_PLUGIN_NAMES) assertEquals(Deno.readLinkSync(`${bin}/${n}`), `${bin}/flanctl`);
    assertEquals(Deno.statSync(`${conf}/10-flannel.conflist`).mode! & 0o777, 0o644);
    assertEquals(Deno.readTextFileSync(`${conf}/10-flannel.conflist`), CONFLIST);
    // The plugin names run the binary.
    assertEquals((await new Deno.Command(`${bin}/flannel`).output()).code, 0);
    // Again: nothing rewritten (same inode), nothing left behind.
    const ino = Deno.statSync(`${bin}/flanctl`).ino;
    const again = await installCni(o);
    assertEquals(again.map((s) => s.action), again.map(() => "unchanged"));
    assertEquals(Deno.statSync(`${bin}/flanctl`).ino, ino);
    assertEquals(
      [...Deno.readDirSync(bin)].map((e) => e.name).sort(),
      [INSTALL_LOCK, "flanctl", ...CNI_PLUGIN_NAMES].sort(),
    );
  }));

Deno.test("install-cni: a foreign plugin of the same name is kept as a backup and reported", () =>
  withDirs(async ({ root, bin, conf, src }) => {
    fakeBinary(`${root}/flanctl-v1`, 1, 1);
    Deno.mkdirSync(bin, { recursive: true });
    Deno.writeTextFileSync(`${bin}/bridge`, "#!/bin/sh\necho reference bridge\n", { mode: 0o755 });
    Deno.symlinkSync("/usr/lib/cni/loopback", `${bin}/loopback`);
    Deno.writeTextFileSync(`${bin}/ptp`, "not ours, not a name of ours\n");
    const o = { binDir: bin, confDir: conf, conf: src, source: `${root}/flanctl-v1` };
    const steps = await installCni(o);
    const foreign = steps.filter((s) => s.action === "replaced-foreign");
    assertEquals(foreign.map((s) => [s.path, s.backup]), [
      [`${bin}/bridge`, `${bin}/bridge${BACKUP_SUFFIX}`],
      [`${bin}/loopback`, `${bin}/loopback${BACKUP_SUFFIX}`],
    ]);
    assertEquals(
      Deno.readTextFileSync(`${bin}/bridge${BACKUP_SUFFIX}`),
      "#!/bin/sh\necho reference bridge\n",
    );
    assertEquals(Deno.statSync(`${bin}/bridge${BACKUP_SUFFIX}`).mode! & 0o777, 0o755);
    assertEquals(Deno.readLinkSync(`${bin}/loopback${BACKUP_SUFFIX}`), "/usr/lib/cni/loopback");
    assertEquals(Deno.readLinkSync(`${bin}/bridge`), `${bin}/flanctl`);
    assertEquals(
      Deno.readTextFileSync(`${bin}/ptp`),
      "not ours, not a name of ours\n",
      "other files untouched",
    );
    // A second run finds everything in place and leaves the backups alone.
    assertEquals((await installCni(o)).filter((s) => s.action !== "unchanged"), []);
    assertEquals(
      Deno.readTextFileSync(`${bin}/bridge${BACKUP_SUFFIX}`),
      "#!/bin/sh\necho reference bridge\n",
    );
    // The CLI says what it replaced.
    Deno.removeSync(`${bin}/host-local`);
    Deno.writeTextFileSync(`${bin}/host-local`, "foreign\n");
    const r = await flanctl([
      "install-cni",
      "--cni-bin-dir",
      bin,
      "--cni-conf-dir",
      conf,
      "--link",
      `${bin}/flanctl`,
    ]);
    assertEquals(r.code, 0, r.stderr);
    assertStringIncludes(
      r.stdout,
      `replaced ${bin}/host-local: it was not flanctl's; the original is kept as ${bin}/host-local${BACKUP_SUFFIX}`,
    );
    assertStringIncludes(r.stdout, `unchanged ${bin}/flannel`);
  }));

Deno.test("install-cni: concurrent execs and reads never see a partial or missing binary", () =>
  withDirs(async ({ root, bin, conf }) => {
    fakeBinary(`${root}/v1`, 24, 1);
    fakeBinary(`${root}/v2`, 24, 2);
    const hashes = new Set([
      await sha(Deno.readFileSync(`${root}/v1`)),
      await sha(Deno.readFileSync(`${root}/v2`)),
    ]);
    await installCni({ binDir: bin, confDir: conf, conf: null, source: `${root}/v1` });
    let installing = true;
    const failures: string[] = [];
    let execs = 0, reads = 0;
    const execLoop = (async () => {
      while (installing) {
        const o = await new Deno.Command(`${bin}/flannel`, { stderr: "piped" }).output().catch((e) => ({
          code: -1,
          stderr: new TextEncoder().encode(String(e)),
        }));
        execs++;
        if (o.code !== 0) failures.push(`exec: ${o.code} ${new TextDecoder().decode(o.stderr)}`);
      }
    })();
    const readLoop = (async () => {
      while (installing) {
        const h = await sha(await Deno.readFile(`${bin}/flanctl`));
        reads++;
        if (!hashes.has(h)) failures.push(`read a partial binary (${h.slice(0, 12)})`);
      }
    })();
    for (let i = 0; i < 8; i++) {
      const steps = await installCni({
        binDir: bin,
        confDir: conf,
        conf: null,
        source: `${root}/${i % 2 ? "v1" : "v2"}`,
      });
      assertEquals(steps[0].action, "updated");
    }
    installing = false;
    await Promise.all([execLoop, readLoop]);
    assertEquals(failures, []);
    assert(execs > 3 && reads > 3, `the loops ran (${execs} execs, ${reads} reads)`);
    assertEquals([...Deno.readDirSync(bin)].filter((e) => e.name.includes("tmp")), [], "no temp file left");
  }));

Deno.test("install-cni: usage errors", async () => {
  const r = await flanctl(["install-cni", "--cni-bin-dir", "/nonexistent/x"]);
  assertEquals(r.code, 2);
  assertStringIncludes(r.stderr, "flanctl: --source: required here");
  const both = await flanctl(["install-cni", "--source", "/bin/true", "--link", "/usr/local/bin/flanctl"]);
  assertEquals(both.code, 2);
  assertStringIncludes(both.stderr, "--link: conflicts with --source");
});

Deno.test("install-cni: without a compiled binary, a launcher and the runtime the CNI path needs", () =>
  withDirs(async ({ root, bin, conf }) => {
    // install.sh's launcher mode: the pinned deno plus cni.js, bundled the way install.sh bundles it.
    const b = await new Deno.Command(Deno.execPath(), {
      args: ["bundle", "--quiet", "--platform", "deno", "-o", `${root}/lib/cni.js`, `${ROOT}cli/cni_main.ts`],
    }).output();
    assertEquals(b.code, 0, new TextDecoder().decode(b.stderr));
    // Through the CLI, as install.sh's launcher runs it (FLANCTL_LIBDIR set, running under deno).
    const r = await flanctl(["install-cni", "--cni-bin-dir", bin, "--cni-conf-dir", conf], {
      env: { FLANCTL_LIBDIR: `${root}/lib` },
    });
    assertEquals(r.code, 0, r.stderr);
    assertStringIncludes(r.stdout, `installed ${bin}/flanctl`);
    const rt = [...Deno.readDirSync(bin)].filter((e) => e.name.startsWith(".flanctl-runtime-"));
    assertEquals(rt.length, 1);
    assertEquals(Deno.statSync(`${bin}/${rt[0].name}/deno`).mode! & 0o777, 0o755);
    assertEquals(Deno.statSync(`${bin}/flanctl`).mode! & 0o777, 0o755);
    // The warm run's code cache is in the database, not in SQLite's write-ahead log every call would read.
    const cache = `${bin}/${rt[0].name}/cache`;
    assert(Deno.statSync(`${cache}/v8_code_cache_v2`).size > 100_000, "no V8 code cache in the database");
    let wal = 0;
    try {
      wal = Deno.statSync(`${cache}/v8_code_cache_v2-wal`).size;
    } catch { /* no log at all */ }
    assertEquals(wal, 0, "the code cache was left in the write-ahead log");
    // ...with what a portmap firewall call loads of Deno's own modules, so no hostPort pod writes it later.
    assert(hasCodeCache(cache, "ext:deno_process/40_process.js"), "Deno's process module not cached");
    // kubelet's view: a plugin name runs the CNI entry point with no checkout and no config.
    const p = new Deno.Command(`${bin}/loopback`, {
      env: { CNI_COMMAND: "VERSION" },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      cwd: "/",
    }).spawn();
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(`{"cniVersion":"1.1.0"}`));
    await w.close();
    const o = await p.output();
    assertEquals(o.code, 0, new TextDecoder().decode(o.stderr));
    assert(JSON.parse(new TextDecoder().decode(o.stdout)).supportedVersions.includes("1.1.0"));
    // A DEL runs in full and leaves the attachment's deleted record (lib/cni/deleted.ts) in the runtime's
    // own directory; the repeated DEL is answered by the launcher without starting Deno (no trace).
    const records = `${bin}/${rt[0].name}/deleted`;
    assertEquals([...Deno.readDirSync(records)], [], "made empty by the install, before any call");
    const del = async () => {
      const c = new Deno.Command(`${bin}/loopback`, {
        env: {
          CNI_COMMAND: "DEL",
          CNI_CONTAINERID: "c0ffee",
          CNI_IFNAME: "lo",
          CNI_PATH: bin,
          CNI_NETNS: "",
          FLANCTL_CNI_TRACE: "1",
        },
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const w = c.stdin.getWriter();
      await w.write(new TextEncoder().encode(`{"cniVersion":"1.1.0","name":"lo","type":"loopback"}`));
      await w.close();
      const out = await c.output();
      const [stdout, stderr] = [out.stdout, out.stderr].map((b) => new TextDecoder().decode(b));
      return { code: out.code, stdout, traced: stderr.includes("trace ") };
    };
    assertEquals(await del(), { code: 0, stdout: "", traced: true });
    assertEquals(Deno.readTextFileSync(`${records}/loopback:lo:c0ffee`), "deleted\n");
    assertEquals(await del(), { code: 0, stdout: "", traced: false });
    // portmap's ADD without port mappings is answered by the launcher too (lib/cni/early_add.ts).
    const add = new Deno.Command(`${bin}/portmap`, {
      env: {
        CNI_COMMAND: "ADD",
        CNI_CONTAINERID: "c0ffee",
        CNI_IFNAME: "eth0",
        CNI_NETNS: "/var/run/netns/none",
        CNI_PATH: bin,
        FLANCTL_CNI_TRACE: "1",
      },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const aw = add.stdin.getWriter();
    await aw.write(
      new TextEncoder().encode(
        `{"cniVersion":"1.0.0","name":"cbr0","type":"portmap","prevResult":` +
          `{"cniVersion":"1.0.0","ips":[{"interface":0,"address":"10.244.1.5/24"}]}}`,
      ),
    );
    await aw.close();
    const added = await add.output();
    assertEquals(
      [added.code, new TextDecoder().decode(added.stdout), new TextDecoder().decode(added.stderr)],
      [0, `{"cniVersion":"1.0.0","ips":[{"address":"10.244.1.5/24","interface":0}]}\n`, ""],
    );
    assertEquals(Deno.readTextFileSync(`${records}/portmap:eth0:c0ffee`), "deleted\n");
    // Idempotent.
    const again = await installCni({
      binDir: bin,
      confDir: conf,
      conf: null,
      runtime: { deno: Deno.execPath(), cniJs: `${root}/lib/cni.js` },
    });
    assertEquals(again.filter((s) => s.action !== "unchanged"), []);
    assertEquals(Deno.readTextFileSync(`${records}/loopback:lo:c0ffee`), "deleted\n");
    // A FIFO where the launcher goes is replaced, never read (a read would block install-cni for good).
    Deno.removeSync(`${bin}/flanctl`);
    assertEquals((await new Deno.Command("mkfifo", { args: [`${bin}/flanctl`] }).output()).code, 0);
    const fifo = await run([
      "timeout",
      "30",
      ...flanctlCmd("install-cni", "--cni-bin-dir", bin, "--cni-conf-dir", conf),
    ], {
      env: { FLANCTL_LIBDIR: `${root}/lib` },
    });
    assert(fifo.code !== 124, "install-cni hung on a FIFO at <bin dir>/flanctl");
    assertEquals(fifo.code, 0, fifo.stderr);
    assert(Deno.lstatSync(`${bin}/flanctl`).isFile, "the launcher replaced the FIFO");
    // A launcher switched to the runtime starts with no records (an unchanged one kept them above).
    assertEquals(
      [...Deno.readDirSync(records)],
      [],
      "the records went with the switch (the directory is new)",
    );
    assertEquals(await del(), { code: 0, stdout: "", traced: true });
  }));

Deno.test("install-cni: a FIFO or /dev/zero as --cni-conf is refused before anything is installed", () =>
  withDirs(async ({ root, bin, conf }) => {
    fakeBinary(`${root}/flanctl-v1`, 1, 1);
    await new Deno.Command("mkfifo", { args: [`${root}/fifo.json`] }).output();
    for (const [path, kind] of [[`${root}/fifo.json`, "a FIFO"], ["/dev/zero", "a character device"]]) {
      const o = { binDir: bin, confDir: conf, conf: path, source: `${root}/flanctl-v1` };
      // Bounded: a read that waited on the FIFO would lose the race instead of hanging the test.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const res = await Promise.race([
        installCni(o).then(() => "installed", (e) => String(e)),
        new Promise<string>((r) => timer = setTimeout(() => r("timed out"), 20_000)),
      ]);
      clearTimeout(timer);
      assertStringIncludes(
        res,
        `--cni-conf ${path}: cannot read it (${path}: is ${kind}, not a regular file)`,
      );
      assertEquals(lstatOrNull(`${bin}/flanctl`), null, "nothing installed");
    }
  }));

function lstatOrNull(p: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(p);
  } catch {
    return null;
  }
}
