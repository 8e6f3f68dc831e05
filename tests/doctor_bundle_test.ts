/**
 * `flanctl doctor --bundle FILE.tar.gz` on the fixture node: the archive holds the doctor report,
 * status, inspect, rules, subnet.env, CNI configs, daemon log tail and versions, and no secret — a known
 * etcd password (given through the environment) and a kube token (in a kubeconfig among the CNI configs
 * and in the log) are nowhere in it, nor is a private key.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, sh } from "./netns.ts";
import { doctorArgs, withDoctorNode } from "./doctor_fixture.ts";

// neigh-gc reads the host-wide neighbour table, which the tests running beside these fill: a bundle of a
// healthy node is asked for without it (lib/doctor/checks/neigh_test.ts and tests/doctor_kernel_test.ts
// prove the check).
const SKIP = ["--skip", "neigh-gc"];

const PASSWORD = "etcdPW-s3cr3t-4711";
const TOKEN = "kubeTOKEN-s3cr3t-0815.abcdef";

needsRoot.test("doctor --bundle: everything a maintainer asks for, no etcd password, kube token or key", async () => {
  await withDoctorNode(async (n) => {
    await Deno.mkdir(`${n.confDir}/flannel.d`);
    await Deno.writeTextFile(
      `${n.confDir}/flannel.d/flannel-kubeconfig`,
      `apiVersion: v1\nkind: Config\nusers:\n- name: flannel\n  user:\n    token: ${TOKEN}\n`,
    );
    await Deno.writeTextFile(
      `${n.confDir}/flannel.d/client.key`,
      "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkq\n-----END PRIVATE KEY-----\n",
    );
    const log = `${n.dir}/daemon.log`;
    await Deno.writeTextFile(
      log,
      `old line\nconnecting to etcd with password ${PASSWORD}\nAuthorization: Bearer ${TOKEN}\nlast line\n`,
    );
    const file = `${n.dir}/bundle.tar.gz`;
    const r = await flanctl(doctorArgs(n, "--bundle", file, "--log-file", log, "-o", "json", ...SKIP), {
      env: { FLANNELD_ETCD_PASSWORD: PASSWORD },
    });
    assertEquals(r.code, 0, r.stdout + r.stderr);
    assertStringIncludes(r.stderr, `bundle ${file} written`);
    const out = `${n.dir}/unpacked`;
    await Deno.mkdir(out);
    await sh("tar", "-xzf", file, "-C", out);
    const list = (await sh("sh", "-c", `cd ${out}/flanctl-bundle && find . -type f | sort`)).trim().split(
      "\n",
    );
    for (
      const f of [
        "./doctor.json",
        "./status.json",
        "./inspect.txt",
        "./iptables-save.txt",
        "./nft-ruleset.txt",
        "./subnet.env",
        "./flanctl.json",
        "./cni/10-flannel.conflist",
        "./cni/flannel.d/flannel-kubeconfig",
        "./cni/flannel.d/client.key.omitted",
        "./daemon.log",
        "./versions.txt",
      ]
    ) assert(list.includes(f), `bundle lacks ${f}: ${list.join(" ")}`);
    const all = await sh(
      "sh",
      "-c",
      `cat ${out}/flanctl-bundle/* ${out}/flanctl-bundle/*/* ${out}/flanctl-bundle/*/*/* 2>/dev/null; true`,
    );
    for (const secret of [PASSWORD, TOKEN, "s3cr3t", "PRIVATE KEY-----\nMII"]) {
      assertEquals(all.includes(secret), false, `bundle contains ${secret}`);
    }
    const grep = await sh("sh", "-c", `zcat ${file} | grep -c s3cr3t || true`);
    assertEquals(grep.trim(), "0");
    // The content is there, only the secrets are gone.
    const logText = await Deno.readTextFile(`${out}/flanctl-bundle/daemon.log`);
    assertStringIncludes(logText, "connecting to etcd with password <redacted>");
    assertStringIncludes(logText, "Authorization: Bearer <redacted>");
    assertStringIncludes(
      await Deno.readTextFile(`${out}/flanctl-bundle/cni/flannel.d/flannel-kubeconfig`),
      "token: <redacted>",
    );
    assertEquals(
      JSON.parse(await Deno.readTextFile(`${out}/flanctl-bundle/doctor.json`)).summary.status,
      "OK",
    );
    assertEquals(
      JSON.parse(await Deno.readTextFile(`${out}/flanctl-bundle/status.json`)).daemon.running,
      true,
    );
    assertStringIncludes(await Deno.readTextFile(`${out}/flanctl-bundle/inspect.txt`), "flannel.1");
    assertStringIncludes(
      await Deno.readTextFile(`${out}/flanctl-bundle/iptables-save.txt`),
      "FLANNEL-POSTRTG",
    );
  });
});

needsRoot.test("doctor --bundle: the password in the file named by --etcd-password-file is redacted too", async () => {
  await withDoctorNode(async (n) => {
    const secret = "pw-from-a-file-7f3a9";
    const pwFile = `${n.dir}/etcd-password`;
    await Deno.writeTextFile(pwFile, `${secret}\n`, { mode: 0o600 });
    const log = `${n.dir}/daemon.log`;
    await Deno.writeTextFile(log, `connecting to etcd with password ${secret}\n`);
    const file = `${n.dir}/bundle.tar.gz`;
    const r = await flanctl(
      doctorArgs(
        n,
        "--bundle",
        file,
        "--log-file",
        log,
        "--etcd-password-file",
        pwFile,
        "-o",
        "json",
        ...SKIP,
      ),
    );
    assertEquals(r.code, 0, r.stdout + r.stderr);
    const grep = await sh("sh", "-c", `zcat ${file} | grep -c ${secret} || true`);
    assertEquals(grep.trim(), "0", "the bundle holds the password from --etcd-password-file");
    const out = `${n.dir}/unpacked`;
    await Deno.mkdir(out);
    await sh("tar", "-xzf", file, "-C", out);
    assertStringIncludes(
      await Deno.readTextFile(`${out}/flanctl-bundle/daemon.log`),
      "connecting to etcd with password <redacted>",
    );
  });
});
