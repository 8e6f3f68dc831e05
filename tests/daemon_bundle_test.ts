/**
 * The installed daemon's bundle: cli/daemon_entry.ts bundled the way install.sh bundles it (one daemon.js, no
 * deno.json or lockfile) answers --version, and runs two udp nodes whose data-path workers load from
 * `$FLANCTL_LIBDIR/src` (the installed source tree; here a link to this checkout): pods ping both ways. The
 * daemons run with the launcher's flags (install.sh's DAEMON_DENO_FLAGS / DAEMON_V8_FLAGS: --jitless, FFI
 * and the workers included), and a udp daemon replaces itself (same pid) by one with the JIT.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { DaemonCluster } from "./daemon_fixture.ts";
import { nsRun, run } from "./netns.ts";
import { VERSION } from "../lib/base/version.ts";
import { FakeApiServer, kubeconfigYaml } from "./kube_fake_api.ts";
import { installDaemonInto } from "./installed_daemon.ts";
import { BUNDLE_DENO_RUN_FLAGS, CNI_DENO_RUN_FLAGS } from "../lib/cni/launch.ts";

needsRoot.test("daemon bundle: daemon.js as install.sh builds it runs flags, and udp workers from FLANCTL_LIBDIR/src", async () => {
  const libdir = await Deno.makeTempDir({ prefix: "flanctl-daemon-js-" });
  const c = new DaemonCluster("10.94");
  try {
    const { cmd: daemon, v8 } = await installDaemonInto(libdir);
    const v = await run([...daemon, "--version"]);
    assertEquals([v.code, v.stdout.trim()], [0, VERSION], v.stderr);
    const bad = await run([...daemon, "--no-such-flag"]);
    assertEquals(bad.code, 2, bad.stderr);

    await c.init(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "udp" } }));
    const a = await c.addNode(), n2 = await c.addNode();
    const env = { FLANCTL_LIBDIR: libdir, FLANCTL_DAEMON_V8_FLAGS: v8 };
    c.start(a, [], env, daemon);
    c.start(n2, [], env, daemon);
    await c.waitReady(a);
    await c.waitReady(n2);
    const pa = await c.addPod(a), pb = await c.addPod(n2);
    for (const [from, to] of [[pa, pb], [pb, pa]]) {
      let ok = false;
      for (let i = 0; i < 20 && !ok; i++) {
        ok = (await nsRun(from.ns, ["ping", "-c", "1", "-W", "1", to.ip])).code === 0;
      }
      assert(
        ok,
        `pod ${from.ip} → ${to.ip} over udp from daemon.js\n${a.log.join("\n")}\n${n2.log.join("\n")}`,
      );
    }
    if (v8.split(",").includes("--jitless")) {
      // A udp daemon runs itself again with the JIT (execve: the same pid), then serves without --jitless.
      for (const n of [a, n2]) {
        const log = n.log.join("\n");
        assert(n.log.some((l) => l.includes("running again with the JIT")), log);
        assertEquals(n.log.filter((l) => l.includes("starting flanctl daemon")).length, 2, log);
        assert(!n.log.some((l) => l.includes("level=warn") && l.includes("--jitless")), log);
        const cmdline = Deno.readTextFileSync(`/proc/${n.proc!.pid}/cmdline`);
        assert(cmdline.includes("--v8-flags=") && !cmdline.includes("--jitless"), cmdline);
      }
    }
  } finally {
    await c.close();
    await Deno.remove(libdir, { recursive: true });
  }
});

needsRoot.test("daemon bundle: daemon.js in kube mode with a kubeconfig file (npm:yaml inside the bundle) gets ready", async () => {
  const libdir = await Deno.makeTempDir({ prefix: "flanctl-daemon-js-" });
  const c = new DaemonCluster("10.89");
  let api: FakeApiServer | null = null;
  try {
    const { cmd: daemon, v8 } = await installDaemonInto(libdir);
    await c.init();
    const a = await c.addNode();
    api = new FakeApiServer({ hostname: "10.89.0.1", netns: c.underlay });
    api.upsert("self", { podCIDR: "10.244.7.0/24", podCIDRs: ["10.244.7.0/24"] });
    await Deno.writeTextFile(
      `${c.tmp}/net-conf.json`,
      JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }),
    );
    await Deno.writeTextFile(
      `${c.tmp}/kubeconfig`,
      kubeconfigYaml(api.url),
    );
    c.start(
      a,
      [
        "--kube-subnet-mgr",
        `--kubeconfig-file=${c.tmp}/kubeconfig`,
        `--net-config-path=${c.tmp}/net-conf.json`,
      ],
      { FLANCTL_LIBDIR: libdir, FLANCTL_DAEMON_V8_FLAGS: v8, NODE_NAME: "self" },
      daemon,
    );
    await c.waitReady(a);
    const env = await Deno.readTextFile(a.subnetFile);
    assert(env.includes("FLANNEL_SUBNET=10.244.7.1/24"), `${env}\n${a.log.join("\n")}`);
    const ann = api.nodes.get("self")!.metadata.annotations;
    assertEquals(ann["flannel.alpha.coreos.com/backend-type"], "vxlan", a.log.join("\n"));
  } finally {
    await api?.close();
    await c.close();
    await Deno.remove(libdir, { recursive: true });
  }
});

const LAUNCHER = "/usr/local/bin/flanctl";
const launcherText = (() => {
  try {
    return Deno.readTextFileSync(LAUNCHER);
  } catch {
    return null;
  }
})();

Deno.test({
  name: "daemon bundle: install.sh's launcher runs daemon.js with the bundles' flags (lib/cni/launch.ts)",
  // Only where install.sh installed a launcher (CI runs it first; a compiled binary has no launcher).
  ignore: !launcherText?.startsWith("#!/bin/sh"),
  fn() {
    const lines = launcherText!.split("\n").filter((l) => l.includes("/daemon.js"));
    assertEquals(lines.length, 2, `the flanneld and the daemon line:\n${launcherText}`);
    for (const l of lines) {
      assert(l.includes(` run ${BUNDLE_DENO_RUN_FLAGS.join(" ")} $v8 "`), l);
    }
    const cni = launcherText!.split("\n").find((l) => l.includes("/cni.js"));
    assert(cni?.includes(` run ${CNI_DENO_RUN_FLAGS.join(" ")} "`), cni);
  },
});
