/**
 * The test suite's own environment: FLANCTL_TEST_PREFIX names every namespace and lab the tests make, and
 * side-by-side tests fail loudly under CI when the reference plugins are missing (skip with a warning
 * elsewhere).
 */
import { assert, assertEquals, assertStringIncludes, assertThrows } from "./assert.ts";
import { FALLBACK_TUNNELS, isFallbackTunnel, TEST_PREFIX, testPrefix, uniqueName } from "./netns.ts";
import { labName } from "./lab_fixture.ts";
import { missingRefPlugins, REF_DIR } from "./cni_helpers.ts";
import { DEBIAN_REF_CNI_DIR } from "./peers.ts";

const ROOT = new URL("..", import.meta.url).pathname;

async function deno(args: string[], env: Record<string, string>) {
  const o = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    clearEnv: false,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: o.code, out: dec.decode(o.stdout) + dec.decode(o.stderr) };
}

Deno.test("test prefix: default ft, FLANCTL_TEST_PREFIX validated, names fit netns/link and lab limits", () => {
  assertEquals(testPrefix(undefined), "ft");
  assertEquals(testPrefix(""), "ft");
  assertEquals(testPrefix("ci7"), "ci7");
  for (const bad of ["CI", "7a", "a-b", "abcdefg"]) {
    assertThrows(() => testPrefix(bad), Error, "FLANCTL_TEST_PREFIX");
  }
  const n = uniqueName("dn");
  assert(n.startsWith(TEST_PREFIX) && n.length <= 15, n);
  const l = labName("lv");
  assert(l.startsWith(TEST_PREFIX.slice(0, 6)) && /^[a-z0-9]{1,12}$/.test(l), l);
});

Deno.test("test prefix: FLANCTL_TEST_PREFIX=zq5 names namespaces and labs zq5…", async () => {
  const code = `import { uniqueName } from "./tests/netns.ts";
import { labName } from "./tests/lab_fixture.ts";
console.log(uniqueName("dn"), labName("lv"));`;
  const r = await deno(["eval", "--ext=ts", code], { FLANCTL_TEST_PREFIX: "zq5" });
  assertEquals(r.code, 0, r.out);
  const [ns, lab] = r.out.trim().split(" ");
  assert(ns.startsWith("zq5dn") && ns.length <= 15, ns);
  assert(lab.startsWith("zq5lv") && lab.length === 11, lab);
  const bad = await deno(["eval", "--ext=ts", code], { FLANCTL_TEST_PREFIX: "Bad!" });
  assert(bad.code !== 0);
  assertStringIncludes(bad.out, "FLANCTL_TEST_PREFIX: 'Bad!'");
});

Deno.test("root tests: run as root; skipped with the reason elsewhere; under CI=true a non-root run fails", async () => {
  const args = ["test", "-A", "--no-check=remote", "tests/fixtures/root_probe.ts"];
  const quiet = [...args.slice(0, 3), "--quiet", ...args.slice(3)]; // as deno task test runs
  const root = await deno(args, { FLANCTL_PROBE_UID: "0", CI: "true" });
  assertEquals(root.code, 0, root.out);
  assertStringIncludes(root.out, "3 passed | 0 failed");
  assert(!root.out.includes("needs root)") && !root.out.includes("not root"), root.out);
  const why = "tests/fixtures/root_probe.ts: not root (uid 1000); its tests that need root";
  const dev = await deno(args, { FLANCTL_PROBE_UID: "1000", CI: "false" });
  assertEquals(dev.code, 0, dev.out);
  assertStringIncludes(dev.out, "0 passed | 0 failed | 3 ignored");
  assertEquals(dev.out.split(`warning: ${why}`).length, 2, `the reason, once per file:\n${dev.out}`);
  const devQuiet = await deno(quiet, { FLANCTL_PROBE_UID: "1000", CI: "false" });
  assertEquals(devQuiet.code, 0, devQuiet.out);
  assertStringIncludes(devQuiet.out, "probe: needs root, options and a body (needs root) ... ignored");
  const ci = await deno(quiet, { FLANCTL_PROBE_UID: "1000", CI: "true" });
  assert(ci.code !== 0, `under CI a non-root run must fail:\n${ci.out}`);
  assertStringIncludes(ci.out, "tests/fixtures/root_probe.ts: tests that need root ... FAILED");
  assertStringIncludes(ci.out, `${why} (namespaces, links, firewall rules, labs, daemons) are skipped`);
  assertStringIncludes(ci.out, "0 passed | 1 failed | 3 ignored");
});

Deno.test("root tests: without br_netfilter a root run says so at once: a failure under CI=true, else a warning", async () => {
  const args = ["test", "-A", "--no-check=remote", "--quiet", "tests/fixtures/root_probe.ts"];
  const missing = {
    FLANCTL_PROBE_UID: "0",
    FLANCTL_PROBE_BR_NETFILTER: "/proc/sys/net/flanctl-no-such-sysctl",
  };
  const why = "br_netfilter is not loaded (/proc/sys/net/flanctl-no-such-sysctl is missing)";
  const ci = await deno(args, { ...missing, CI: "true" });
  assert(ci.code !== 0, `under CI a root run without br_netfilter must fail:\n${ci.out}`);
  assertStringIncludes(ci.out, "tests/fixtures/root_probe.ts: br_netfilter ... FAILED");
  assertStringIncludes(ci.out, `${why}: the daemons of the root tests refuse to start in iptables mode`);
  assertStringIncludes(ci.out, "modprobe br_netfilter");
  assertStringIncludes(ci.out, "3 passed | 1 failed");
  const dev = await deno(args.filter((a) => a !== "--quiet"), { ...missing, CI: "false" });
  assertEquals(dev.code, 0, dev.out);
  assertStringIncludes(dev.out, "3 passed | 0 failed");
  assertEquals(
    dev.out.split(`warning: tests/fixtures/root_probe.ts: ${why}`).length,
    2,
    `once per file:\n${dev.out}`,
  );
});

Deno.test("reference plugins: missing ones fail the suite under CI=true, are skipped with a warning elsewhere", async () => {
  assertEquals(missingRefPlugins(["flanctl-no-such-plugin"]), ["flanctl-no-such-plugin"]);
  const args = ["test", "-A", "--no-check=remote", "tests/fixtures/ref_plugins_probe.ts"];
  const ci = await deno(args, { CI: "true" });
  assert(ci.code !== 0, `under CI a missing reference plugin must fail the run:\n${ci.out}`);
  assertStringIncludes(ci.out, "side-by-side tests need the reference plugins (flanctl-no-such-plugin)");
  assertStringIncludes(ci.out, "FAILED");
  const dev = await deno(args, { CI: "false" });
  assertEquals(dev.code, 0, dev.out);
  assertStringIncludes(
    dev.out,
    `warning: reference CNI plugins missing in ${REF_DIR}: flanctl-no-such-plugin`,
  );
  assertStringIncludes(dev.out, "1 ignored");
});

Deno.test({
  name: "reference plugins: Debian's fallback fails the suite under CI=true (the pinned build must be there)",
  ignore: missingRefPlugins(["bridge"], DEBIAN_REF_CNI_DIR).length > 0,
  fn: async () => {
    const args = ["test", "-A", "--no-check=remote", "tests/fixtures/ref_plugins_probe.ts"];
    // A cache without the build: the reference falls back to /usr/lib/cni.
    const env = { FLANCTL_DEV_CACHE: "/nonexistent/flanctl-dev", FLANCTL_PROBE_PLUGIN: "bridge" };
    const ci = await deno(args, { ...env, CI: "true" });
    assert(ci.code !== 0, `under CI Debian's reference must fail the run:\n${ci.out}`);
    assertStringIncludes(ci.out, "side-by-side tests need the pinned reference plugins build");
    assertStringIncludes(ci.out, "tools/peers/build.sh cni-plugins");
    const dev = await deno(args, { ...env, CI: "false" });
    assertEquals(dev.code, 0, dev.out);
    assertStringIncludes(
      dev.out,
      `note: comparing with Debian's containernetworking-plugins in /usr/lib/cni`,
    );
    assertStringIncludes(dev.out, "1 passed");
  },
});

Deno.test("fallback tunnels: the kernel's per-namespace devices are left out by name and kind, nothing else", () => {
  for (const [ifname, kind] of Object.entries(FALLBACK_TUNNELS)) {
    assert(isFallbackTunnel({ ifname, linkinfo: { info_kind: kind } }), ifname);
    // A test's own device of that name but another kind (or none) is kept.
    assert(!isFallbackTunnel({ ifname, linkinfo: { info_kind: "veth" } }), ifname);
    assert(!isFallbackTunnel({ ifname }), ifname);
  }
  assert(!isFallbackTunnel({ ifname: "tunl1", linkinfo: { info_kind: "ipip" } }));
  assert(!isFallbackTunnel({ ifname: "toString", linkinfo: { info_kind: undefined } }));
  assert(!isFallbackTunnel({ ifname: "flannel.1", linkinfo: { info_kind: "vxlan" } }));
});

Deno.test("pod env: a CI pod's KUBERNETES_SERVICE_HOST/PORT never reach the suite's children unless passed", async () => {
  const code = `import { run } from "./tests/netns.ts";
const echo = ["sh", "-c", "echo \${KUBERNETES_SERVICE_HOST-unset} \${KUBERNETES_SERVICE_PORT-unset}"];
console.log((await run(echo)).stdout.trim());
console.log((await run(echo, { env: { KUBERNETES_SERVICE_HOST: "10.96.0.9" } })).stdout.trim());`;
  const r = await deno(["eval", "--ext=ts", code], {
    KUBERNETES_SERVICE_HOST: "10.96.0.1",
    KUBERNETES_SERVICE_PORT: "443",
  });
  assertEquals(r.code, 0, r.out);
  assertEquals(r.out.trim().split("\n"), ["unset unset", "10.96.0.9 unset"]);
});
