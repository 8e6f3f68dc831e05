/**
 * tests/peers.ts finds the real peers as documented: an override, then the build cache of the pinned
 * version, then PATH — a Go program on PATH only when it prints the pinned version; a missing peer under
 * CI=true registers a failing test (checked in a child process), elsewhere it is a warning.
 * @module
 */
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { peerVersions } from "./peers.ts";

function script(path: string, out: string): void {
  Deno.writeTextFileSync(path, `#!/bin/sh\necho '${out}'\n`, { mode: 0o755 });
}

/**
 * Runs `body` (statements using findPeer, missingPeers, peerBinDir, refCniDir, assertEquals) in a child Deno with exactly
 * `env`: test modules share one process, so changing PATH or FLANCTL_PEER_* here would change them for every
 * module running beside this one (and theirs would change this lookup).
 */
async function inChild(dir: string, env: Record<string, string>, body: string): Promise<void> {
  const file = `${dir}/lookup_${crypto.randomUUID()}.ts`;
  Deno.writeTextFileSync(
    file,
    `import { findPeer, missingPeers, peerBinDir, refCniDir } from "${
      new URL("./peers.ts", import.meta.url).href
    }";\n` +
      `import { assertEquals } from "${new URL("./assert.ts", import.meta.url).href}";\n${body}\n`,
  );
  const keep = Object.fromEntries(
    ["HOME", "DENO_DIR"].flatMap((k) => Deno.env.get(k) === undefined ? [] : [[k, Deno.env.get(k)!]]),
  );
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-check", file],
    env: { ...keep, ...env },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assertEquals(out.code, 0, text);
}

Deno.test("peers: override, then the cache of the pinned version, then PATH only with the pinned version", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "flanctl-peers-" });
  try {
    const v = peerVersions();
    assert(/^v\d+\.\d+\.\d+$/.test(v.kubernetes) && /^v\d/.test(v.flanneld), JSON.stringify(v));
    Deno.mkdirSync(`${dir}/path`);
    script(`${dir}/path/flanneld`, "v0.0.1"); // a flanneld of another version (or flanctl's own name)
    script(`${dir}/path/crictl`, `crictl version ${v.crictl}`);
    script(`${dir}/path/etcd`, "etcd");
    const env = { FLANCTL_DEV_CACHE: `${dir}/cache`, PATH: `${dir}/path` };
    await inChild(
      dir,
      env,
      `assertEquals(findPeer("flanneld"), undefined, "wrong version on PATH is not used");
assertEquals(findPeer("crictl"), "${dir}/path/crictl", "the pinned version on PATH is used");
assertEquals(findPeer("etcd"), "${dir}/path/etcd");
assertEquals(missingPeers(["flanneld", "etcd", "runc"]), ["flanneld", "runc"]);`,
    );
    // Built into the cache: found there (before PATH).
    Deno.mkdirSync(`${dir}/cache/flanneld-${v.flanneld}/bin`, { recursive: true });
    script(`${dir}/cache/flanneld-${v.flanneld}/bin/flanneld`, v.flanneld);
    await inChild(
      dir,
      env,
      `assertEquals(peerBinDir("flanneld"), "${dir}/cache/flanneld-${v.flanneld}/bin");
assertEquals(findPeer("flanneld"), "${dir}/cache/flanneld-${v.flanneld}/bin/flanneld");`,
    );
    // An override names the file.
    await inChild(
      dir,
      { FLANCTL_DEV_CACHE: `${dir}/cache`, FLANCTL_PEER_KUBE_APISERVER: `${dir}/path/etcd` },
      `assertEquals(findPeer("kube-apiserver"), "${dir}/path/etcd");`,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("peers: a missing peer under CI=true is a failing test naming it and the fix", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "flanctl-peers-ci-" });
  try {
    const t = `${dir}/ci_test.ts`;
    Deno.writeTextFileSync(
      t,
      `import { requirePeers } from "${new URL("./peers.ts", import.meta.url).href}";\n` +
        `Deno.test({ name: "needs flanneld", ignore: !requirePeers(["flanneld"]), fn() {} });\n`,
    );
    const run = (ci: string) =>
      new Deno.Command(Deno.execPath(), {
        args: ["test", "-A", "--no-check", t],
        env: { CI: ci, FLANCTL_DEV_CACHE: `${dir}/none`, PATH: "/usr/bin:/bin" },
        stdout: "piped",
        stderr: "piped",
      }).output();
    const ci = await run("true");
    const out = new TextDecoder().decode(ci.stdout) + new TextDecoder().decode(ci.stderr);
    assertEquals(ci.code, 1, out);
    assertStringIncludes(out, "tests with real peers need flanneld");
    assertStringIncludes(out, "./install.sh --dev");
    const local = await run("");
    const out2 = new TextDecoder().decode(local.stdout) + new TextDecoder().decode(local.stderr);
    assertEquals(local.code, 0, out2);
    assertStringIncludes(out2, "skipping the tests that need them");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("peers: the reference CNI plugins: override, then the finished build of the pinned version, then Debian's", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "flanctl-peers-ref-" });
  try {
    const v = peerVersions()["cni-plugins"];
    assert(/^v\d+\.\d+\.\d+$/.test(v), v);
    const bin = `${dir}/cni-plugins-${v}/bin`;
    const env = { FLANCTL_DEV_CACHE: dir, PATH: "/usr/bin:/bin" };
    const debian = `assertEquals([refCniDir().dir, refCniDir().source], ["/usr/lib/cni", "debian"]);
assertEquals(refCniDir().label.includes("the ${v} build is not in ${bin}"), true);`;
    await inChild(dir, env, debian);
    // bin/ without the stamp: a build cut short is not used.
    Deno.mkdirSync(bin, { recursive: true });
    await inChild(dir, env, debian);
    Deno.writeTextFileSync(`${dir}/cni-plugins-${v}/stamp`, "done\n");
    await inChild(
      dir,
      env,
      `assertEquals([refCniDir().dir, refCniDir().source], ["${bin}", "build"]);
assertEquals(refCniDir().label.includes("${v}"), true);`,
    );
    await inChild(
      dir,
      { ...env, FLANCTL_REF_CNI_DIR: `${dir}/mine` },
      `assertEquals([refCniDir().dir, refCniDir().source], ["${dir}/mine", "override"]);`,
    );
    // cnitool: only the cache's build (it prints no version to check one on PATH by).
    const tool = `${dir}/cnitool-${peerVersions().cnitool}/bin`;
    Deno.mkdirSync(tool, { recursive: true });
    script(`${tool}/cnitool`, "");
    await inChild(dir, env, `assertEquals(findPeer("cnitool"), "${tool}/cnitool");`);
    await inChild(
      dir,
      { FLANCTL_DEV_CACHE: `${dir}/none`, PATH: tool },
      `assertEquals(findPeer("cnitool"), undefined);`,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
