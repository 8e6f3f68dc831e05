/**
 * Odd files never hang or exhaust memory: a FIFO or /dev/zero as doctor's --subnet-file, a FIFO as the
 * first conflist, a FIFO as the flannel plugin's subnetFile and as CNI_NETNS. Each gives a clear error
 * (doctor: `unknown` with the reason) well within the `timeout` the commands run under; a refused ADD
 * leaves no saved config behind.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { cniEnv, listFiles, pluginCmd, tempDir } from "./cni_helpers.ts";
import { doctorArgs, findings, withDoctorNode } from "./doctor_fixture.ts";
import { flanctlCmd, run, withNetns } from "./netns.ts";

/** Runs with a hard limit: a hang shows up as exit 124, not as a stuck test. */
const LIMIT = "30";

function mkfifo(path: string): Promise<unknown> {
  return run(["mkfifo", path]);
}

needsRoot.test("doctor: a FIFO or /dev/zero as --subnet-file, a FIFO as conflist: unknown with the reason", async () => {
  await withDoctorNode(async (n) => {
    const fifo = `${n.dir}/subnet.fifo`;
    await mkfifo(fifo);
    for (const [path, kind] of [[fifo, "FIFO"], ["/dev/zero", "character device"]]) {
      const r = await run([
        "timeout",
        LIMIT,
        ...flanctlCmd(...doctorArgs(n, "-o", "json", "--subnet-file", path)),
      ]);
      assert(r.code !== 124, `doctor --subnet-file ${path} hung`);
      const doc = JSON.parse(r.stdout);
      const f = findings(doc, "subnet-env");
      assertEquals(f.length, 1, r.stdout);
      assertEquals(f[0].severity, "unknown", f[0].detail);
      assertStringIncludes(f[0].detail, kind);
    }
    // The first conflist (by name) is a FIFO.
    await mkfifo(`${n.confDir}/00-odd.conflist`);
    const r = await run(["timeout", LIMIT, ...flanctlCmd(...doctorArgs(n, "-o", "json"))]);
    assert(r.code !== 124, "doctor with a FIFO conflist hung");
    const f = findings(JSON.parse(r.stdout), "cni-config");
    assertEquals(f[0].severity, "unknown", f[0].detail);
    assertStringIncludes(f[0].detail, "FIFO");
  });
});

needsRoot.test("cni flannel: a FIFO as subnetFile or CNI_NETNS, /dev/zero as subnetFile: clear error, nothing saved", () =>
  withNetns(async (fx) => {
    const node = await fx.add("odn"), pod = await fx.add("odp");
    const d = tempDir();
    try {
      const env = `${d.path}/subnet.env`;
      Deno.writeTextFileSync(
        env,
        "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.6.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
      );
      await mkfifo(`${d.path}/fifo`);
      const conf = (subnetFile: string) =>
        JSON.stringify({
          cniVersion: "1.0.0",
          name: "cbr0",
          type: "flannel",
          subnetFile,
          dataDir: `${d.path}/flannel`,
          ipam: { dataDir: `${d.path}/networks` },
        });
      const add = async (subnetFile: string, netns: string) => {
        const e = cniEnv({ plugin: "flannel", command: "ADD", netns, containerId: "odd1", conf: {} });
        const envArgs = ["env", "-i", `PATH=${Deno.env.get("PATH")}`, "FLANCTL_ARGV0=flannel"];
        for (const [k, v] of Object.entries(e)) envArgs.push(`${k}=${v}`);
        const r = await run(
          ["timeout", LIMIT, "nsenter", `--net=/var/run/netns/${node}`, ...envArgs, ...pluginCmd()],
          { stdin: conf(subnetFile) },
        );
        assert(r.code !== 124, `ADD with subnetFile=${subnetFile} CNI_NETNS=${netns} hung`);
        const j = JSON.parse(r.stdout) as { code: number; msg: string; details: string };
        return { code: j.code, details: `${j.msg}; ${j.details}` };
      };
      const a = await add(`${d.path}/fifo`, pod);
      assertEquals(a.code, 7, a.details);
      assertStringIncludes(a.details, "FIFO");
      const z = await add("/dev/zero", pod);
      assertEquals(z.code, 7, z.details);
      assertStringIncludes(z.details, "character device");
      const b = await add(env, `${d.path}/fifo`);
      assertEquals(b.code, 4, b.details);
      assertStringIncludes(b.details, "FIFO");
      assertEquals(listFiles(`${d.path}/flannel`).filter((f) => !f.startsWith(".locks/")), []);
    } finally {
      d.cleanup();
    }
  }));
