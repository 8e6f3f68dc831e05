/**
 * A file a reader did not write can never leak another file (issue 30): with subnet.env a symlink to a
 * secret outside /run/flannel, doctor (table and JSON), status (table and JSON), the flannel CNI plugin and
 * doctor's support bundle print and copy nothing of the secret — they refuse the symlink and say so
 * (doctor: critical, with the fix). A symlink inside its own directory (a ConfigMap mount's `..data/`
 * links) is still followed, and a file that does not parse is quoted by at most a short excerpt.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { cniEnv, pluginCmd, tempDir } from "./cni_helpers.ts";
import { doctorArgs, findings, withDoctorNode } from "./doctor_fixture.ts";
import { flanctl, run, sh } from "./netns.ts";
import { EXCERPT_MAX } from "../lib/base/capped_read.ts";

const MARK = "TOPSECRET";
const SECRET = `root:${MARK}1:19000:0:99999:7:::\nFLANNEL_MTU=${MARK}2\nFLANNEL_NETWORK=${MARK}3\n`;

needsRoot.test("files: a symlinked subnet.env pointing outside its directory leaks nothing anywhere", async () => {
  const outside = tempDir();
  try {
    const secret = `${outside.path}/shadow`;
    Deno.writeTextFileSync(secret, SECRET, { mode: 0o600 });
    await withDoctorNode(async (n) => {
      const real = Deno.readTextFileSync(n.subnetFile);
      Deno.removeSync(n.subnetFile);
      Deno.symlinkSync(secret, n.subnetFile);
      const leaks = (what: string, text: string) =>
        assert(!text.includes(MARK), `${what} printed the secret:\n${text}`);

      for (const o of ["table", "json"]) {
        const r = await flanctl(doctorArgs(n, "-o", o));
        leaks(`doctor -o ${o}`, r.stdout + r.stderr);
        if (o === "json") {
          const f = findings(JSON.parse(r.stdout), "subnet-env");
          assertEquals(f[0].severity, "critical", f[0].detail);
          assertStringIncludes(f[0].detail, "symlink");
        }
        const s = await flanctl(
          ["status", "--netns", n.node, "--subnet-file", n.subnetFile, "--store-dir", n.storeDir, "-o", o],
        );
        leaks(`status -o ${o}`, s.stdout + s.stderr);
        assertStringIncludes(s.stdout, "symlink");
      }

      // The flannel CNI plugin: a CNI error naming the refusal, nothing of the file.
      const e = cniEnv({
        plugin: "flannel",
        command: "ADD",
        netns: `/var/run/netns/${n.pod}`,
        containerId: "sym1",
        conf: {},
      });
      const envArgs = ["env", "-i", `PATH=${Deno.env.get("PATH")}`, "FLANCTL_ARGV0=flannel"];
      for (const [k, v] of Object.entries(e)) envArgs.push(`${k}=${v}`);
      const conf = JSON.stringify({
        cniVersion: "1.0.0",
        name: "cbr0",
        type: "flannel",
        subnetFile: n.subnetFile,
        dataDir: `${n.dir}/flannel-sym`,
      });
      const c = await run(["nsenter", `--net=/var/run/netns/${n.node}`, ...envArgs, ...pluginCmd()], {
        stdin: conf,
      });
      leaks("cni flannel", c.stdout + c.stderr);
      assertEquals(JSON.parse(c.stdout).code, 7, c.stdout);
      assertStringIncludes(c.stdout, "symlink");

      // The support bundle: subnet.env not copied (a note says why), the secret nowhere in the archive.
      const file = `${n.dir}/bundle.tar.gz`, out = `${n.dir}/bundle-out`;
      const b = await flanctl(
        doctorArgs(n, "--bundle", file, "--log-file", `${n.dir}/none.log`, "-o", "json"),
      );
      leaks("doctor --bundle", b.stdout + b.stderr);
      await Deno.mkdir(out);
      await sh("tar", "-xzf", file, "-C", out);
      assertEquals((await run(["grep", "-rl", MARK, out])).stdout, "", "the bundle holds the secret");
      assertStringIncludes(Deno.readTextFileSync(`${out}/flanctl-bundle/subnet.env`), "not copied");

      // Inside its own directory a symlink is followed (doctor: subnet-env ok, as with the file itself).
      Deno.removeSync(n.subnetFile);
      Deno.writeTextFileSync(`${n.subnetFile}.real`, real);
      Deno.symlinkSync(`${n.subnetFile}.real`, n.subnetFile);
      const ok = await flanctl(doctorArgs(n, "-o", "json"));
      assertEquals(findings(JSON.parse(ok.stdout), "subnet-env")[0].severity, "ok", ok.stdout);

      // A regular file that does not parse: at most a short excerpt of it in any message or the bundle.
      Deno.removeSync(n.subnetFile);
      Deno.writeTextFileSync(n.subnetFile, `${"x".repeat(40)}${MARK}\n`);
      const bad = await flanctl(doctorArgs(n, "-o", "json"));
      leaks("doctor (unparsable subnet.env)", bad.stdout + bad.stderr);
      assertStringIncludes(bad.stdout, `'${"x".repeat(EXCERPT_MAX)}'…`);
      Deno.removeSync(file);
      await flanctl(doctorArgs(n, "--bundle", file, "--log-file", `${n.dir}/none.log`, "-o", "json"));
      const bundled = (await run(["sh", "-c", `tar -xzOf ${file} flanctl-bundle/subnet.env`])).stdout;
      assertStringIncludes(bundled, "not copied");
      assert(!bundled.includes(MARK), bundled);
    });
  } finally {
    outside.cleanup();
  }
});

Deno.test("files: flanctl's readers refuse a symlink out of its directory, follow one inside it", async () => {
  const d = tempDir();
  try {
    const { readCappedText, excerpt } = await import("../lib/base/capped_read.ts");
    Deno.mkdirSync(`${d.path}/dir/..data`, { recursive: true });
    Deno.writeTextFileSync(`${d.path}/secret`, MARK);
    Deno.writeTextFileSync(`${d.path}/dir/..data/conf`, "ok");
    Deno.symlinkSync(`${d.path}/secret`, `${d.path}/dir/out`);
    Deno.symlinkSync("..data/conf", `${d.path}/dir/conf`);
    Deno.symlinkSync("../secret", `${d.path}/dir/rel`);
    assertEquals(readCappedText(`${d.path}/dir/conf`), "ok");
    for (const p of ["out", "rel"]) {
      let err = "";
      try {
        readCappedText(`${d.path}/dir/${p}`);
      } catch (e) {
        err = (e as Error).message;
      }
      assertStringIncludes(err, "symlink to a file outside");
      assert(!err.includes(MARK) && !err.includes("secret"), err);
    }
    let none = "";
    try {
      readCappedText(`${d.path}/dir/conf`, 1024, "none");
    } catch (e) {
      none = (e as Error).message;
    }
    assertStringIncludes(none, "is a symlink, refused");
    assertEquals(excerpt("a\u001b[2Jb'c"), "'a\\x1b[2Jb\\x27c'");
    assertEquals(excerpt("y".repeat(1000)), `'${"y".repeat(EXCERPT_MAX)}'…`);
  } finally {
    d.cleanup();
  }
});

Deno.test("files: a kubeconfig that is no YAML, or names what it lacks, is quoted by a short excerpt at most", async () => {
  const d = tempDir();
  try {
    const { loadKubeconfig } = await import("../lib/store/kube/kube_client.ts");
    const msg = async (text: string) => {
      Deno.writeTextFileSync(`${d.path}/kubeconfig`, text);
      try {
        await loadKubeconfig(`${d.path}/kubeconfig`);
        return "";
      } catch (e) {
        return (e as Error).message;
      }
    };
    const bad = await msg(`a: b\n ${MARK}: [x\n  c: ${MARK}\n`);
    assertStringIncludes(bad, "is not valid YAML");
    assert(!bad.includes(MARK), bad);
    const named = await msg(`current-context: ${"z".repeat(60)}${MARK}\ncontexts: []\n`);
    assertStringIncludes(named, "has no context named");
    assert(!named.includes(MARK), named);
  } finally {
    d.cleanup();
  }
});
