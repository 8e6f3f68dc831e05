/**
 * A file a reader did not write can never leak another file (issue 30): with subnet.env a symlink to a
 * secret outside /run/flannel, doctor (table and JSON), status (table and JSON), the flannel CNI plugin and
 * doctor's support bundle print and copy nothing of the secret — they refuse the symlink and say so
 * (doctor: critical, with the fix). The readers alone, without root (a symlink inside its own directory, a
 * ConfigMap mount's `..data/` links, still followed; a file that does not parse quoted by at most a short
 * excerpt): lib/base/capped_read_test.ts, lib/store/kube/kubeconfig_test.ts.
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
