/**
 * deploy/build-image.sh: the image builds, twice to the same bytes (same digest), carries what the daemon
 * and install-cni need and nothing of the build (logs, apt lists, caches, device nodes), is labelled with
 * deno.json's version and named as kube-flanctl.yml's image line, and is read by containerd (`ctr images
 * import` into a containerd the test starts in a namespace of its own) and by skopeo (the library `podman
 * load` uses) as an OCI and as a Docker archive.
 *
 * Slow the first time (mmdebstrap, ~1 min); the Debian base is cached in /var/cache/flanctl-dev/image by
 * content hash, so later runs take ~25 s per build. Without mmdebstrap the build tests are skipped with a
 * warning, and fail under CI=true (./install.sh --dev installs it).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { ROOT, run, uniqueName } from "./netns.ts";
import { findProgram } from "../lib/lab/kube.ts";

const onPath = (cmd: string) =>
  (Deno.env.get("PATH") ?? "/usr/bin:/bin").split(":").some((d) => {
    try {
      return Deno.statSync(`${d}/${cmd}`).isFile;
    } catch {
      return false;
    }
  });

const HAVE_MMDEBSTRAP = onPath("mmdebstrap");
if (!HAVE_MMDEBSTRAP) {
  const what = "mmdebstrap not installed (apt-get install mmdebstrap, or ./install.sh --dev)";
  if (Deno.env.get("CI") === "true") {
    Deno.test("image build needs mmdebstrap", () => {
      throw new Error(`${what}; under CI the image tests may not be skipped`);
    });
  } else console.error(`warning: ${what}; skipping the image build tests`);
}

const VERSION = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`)).version as string;
const IMAGE = [
  ...new Set(
    [...Deno.readTextFileSync(`${ROOT}deploy/kube-flanctl.yml`).matchAll(/^\s*image:\s*(\S+)/gm)].map((m) =>
      m[1]
    ),
  ),
];
const EPOCH = "1767225600"; // fixed for the test: 2026-01-01

interface Built {
  out: string;
  digest: string;
  stdout: string;
}

async function build(out: string): Promise<Built> {
  const r = await run([`${ROOT}deploy/build-image.sh`, out], { env: { SOURCE_DATE_EPOCH: EPOCH } });
  assertEquals(r.code, 0, `build-image.sh failed:\n${r.stderr.slice(-4000)}`);
  const digest = /^digest\s+(sha256:[0-9a-f]{64})$/m.exec(r.stdout)?.[1];
  assert(digest, `no digest line in:\n${r.stdout}`);
  return { out, digest, stdout: r.stdout };
}

async function fileSha(path: string): Promise<string> {
  const o = await run(["sha256sum", path]);
  return o.stdout.split(" ")[0];
}

async function tarText(archive: string, member: string): Promise<string> {
  const o = await run(["tar", "-xOf", archive, member]);
  assertEquals(o.code, 0, o.stderr);
  return o.stdout;
}

needsRoot.test({
  name: "build-image.sh: two builds, one digest; contents, labels and name",
  ignore: !HAVE_MMDEBSTRAP,
  sanitizeResources: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "flanctl-image-" });
    try {
      const t0 = Date.now();
      const a = await build(`${dir}/a.tar`);
      const t1 = Date.now();
      const b = await build(`${dir}/b.tar`);
      console.error(
        `  builds: ${((t1 - t0) / 1000).toFixed(1)} s, ${((Date.now() - t1) / 1000).toFixed(1)} s`,
      );
      assertEquals(a.digest, b.digest, "two builds of one tree gave two digests");
      assertEquals(await fileSha(a.out), await fileSha(b.out), "the archives differ byte for byte");
      assertStringIncludes(a.stdout, `image     ${IMAGE[0]}`);

      const index = JSON.parse(await tarText(a.out, "index.json"));
      assertEquals(index.manifests.length, 1);
      assertEquals(index.manifests[0].digest, a.digest);
      assertEquals(index.manifests[0].annotations["io.containerd.image.name"], IMAGE[0]);
      const manifest = JSON.parse(await tarText(a.out, `blobs/sha256/${a.digest.slice(7)}`));
      const config = JSON.parse(await tarText(a.out, `blobs/${manifest.config.digest.replace(":", "/")}`));
      assertEquals(config.config.Labels["org.opencontainers.image.version"], VERSION);
      assertEquals(config.created, "2026-01-01T00:00:00Z");
      assertEquals(config.config.Entrypoint, ["/usr/local/bin/flanctl"]);
      const docker = JSON.parse(await tarText(a.out, "manifest.json"));
      assertEquals(docker[0].RepoTags, [IMAGE[0]]);

      // The layer: everything the daemon and install-cni run, nothing the build left behind.
      const layer = `blobs/${manifest.layers[0].digest.replace(":", "/")}`;
      const list = await run(["sh", "-c", `tar -xOf '${a.out}' '${layer}' | tar -tv --numeric-owner`]);
      assertEquals(list.code, 0, list.stderr);
      const lines = list.stdout.trim().split("\n");
      const names = new Set(lines.map((l) => l.split(/\s+/)[5]));
      for (
        const need of [
          "usr/local/bin/flanctl",
          "usr/local/lib/flanctl/cni.js",
          "usr/local/lib/flanctl/daemon.js",
          "usr/local/lib/flanctl/src/main.ts",
          "usr/lib/x86_64-linux-gnu/libnl-3.so.200",
          "usr/lib/x86_64-linux-gnu/libnl-route-3.so.200",
          "usr/lib/x86_64-linux-gnu/libnftables.so.1",
          "usr/sbin/xtables-nft-multi",
          "usr/sbin/nft",
          "usr/bin/ip",
          "etc/ssl/certs/ca-certificates.crt",
        ]
      ) assert(names.has(need), `${need} missing from the image`);
      const leftovers = [...names].filter((n) =>
        /^var\/log\/.+[^/]$/.test(n) || /^var\/cache\/apt\/.+/.test(n) ||
        /^var\/lib\/apt\/lists\/.+/.test(n) ||
        n === "var/cache/ldconfig/aux-cache" || /_cache_v2/.test(n) ||
        /^usr\/local\/lib\/flanctl\/cni-cache/.test(n) ||
        /^tmp\/.+/.test(n) || /^usr\/src\/.+/.test(n)
      );
      assertEquals(leftovers, [], "build leftovers in the image");
      // The gate's and the tests' npm packages (TypeScript, fast-check) are not the product's.
      const devPkgs = [...names].filter((n) =>
        /\/cache\/npm\/[^/]+\/(typescript|fast-check|pure-rand)\//.test(n)
      );
      assertEquals(devPkgs.slice(0, 3), [], "test-only npm packages in the image");
      assertEquals(lines.filter((l) => /^[cb]/.test(l)), [], "device nodes in the layer");
      const stamps = new Set(lines.map((l) => `${l.split(/\s+/)[3]} ${l.split(/\s+/)[4]}`));
      assertEquals(stamps.size, 1, `one mtime for every file (SOURCE_DATE_EPOCH), got ${[...stamps]}`);
      // The launcher runs install.sh's layout.
      const launcher = await run([
        "sh",
        "-c",
        `tar -xOf '${a.out}' '${layer}' | tar -xO usr/local/bin/flanctl`,
      ]);
      assertStringIncludes(launcher.stdout, "/usr/local/lib/flanctl/cni.js");
      assertStringIncludes(launcher.stdout, "/usr/local/lib/flanctl/daemon.js");

      if (onPath("skopeo")) {
        for (const transport of ["oci-archive", "docker-archive"]) {
          const s = await run(["skopeo", "inspect", "--raw", `${transport}:${a.out}`]);
          assertEquals(s.code, 0, `skopeo inspect ${transport}: ${s.stderr}`);
          const m = JSON.parse(s.stdout);
          assert(m.layers?.length === 1 || m.layers === undefined, s.stdout);
        }
      } else console.error("  skopeo not installed: skopeo/podman's reading of the archive not checked");
      if (onPath("containerd") && onPath("ctr")) await importIntoContainerd(dir, a);
      else console.error("  containerd/ctr not installed: ctr images import not checked");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

/** Starts a private containerd in a namespace of the test's own, imports the archive, checks name and digest. */
async function importIntoContainerd(dir: string, img: Built): Promise<void> {
  const ns = uniqueName("ctr");
  const d = `${dir}/containerd`;
  await Deno.mkdir(d, { recursive: true });
  Deno.writeTextFileSync(
    `${d}/config.toml`,
    [
      "version = 2",
      `root = "${d}/root"`,
      `state = "${d}/state"`,
      `disabled_plugins = ["io.containerd.grpc.v1.cri"]`,
      "[grpc]",
      `  address = "${d}/sock"`,
      "[ttrpc]",
      `  address = "${d}/sock.ttrpc"`,
      "[debug]",
      `  address = ""`,
      "[metrics]",
      `  address = ""`,
    ].join("\n") + "\n",
  );
  assertEquals((await run(["ip", "netns", "add", ns])).code, 0);
  let proc: Deno.ChildProcess | null = null;
  try {
    proc = new Deno.Command("ip", {
      args: ["netns", "exec", ns, "containerd", "--config", `${d}/config.toml`],
      stdout: "null",
      stderr: "null",
    }).spawn();
    const ctr = (...a: string[]) => run(["ctr", "--address", `${d}/sock`, "--namespace", "flanctl", ...a]);
    let up = false;
    for (let i = 0; i < 100 && !up; i++) {
      up = (await ctr("version")).code === 0;
      if (!up) await new Promise((r) => setTimeout(r, 100));
    }
    assert(up, "containerd did not answer within 10 s");
    const imp = await ctr("images", "import", img.out);
    assertEquals(imp.code, 0, `ctr images import: ${imp.stderr}`);
    const ls = await ctr("images", "ls");
    const row = ls.stdout.split("\n").find((l) => l.startsWith(`${IMAGE[0]} `));
    assert(row, `ctr images ls has no ${IMAGE[0]}:\n${ls.stdout}`);
    assertStringIncludes(row, img.digest);
    // Unpacked into the snapshotter: containerd could run it.
    const check = await ctr("images", "check");
    assertStringIncludes(check.stdout.split("\n").find((l) => l.startsWith(IMAGE[0])) ?? "", "complete");
  } finally {
    if (proc) {
      try {
        proc.kill("SIGTERM");
      } catch { /* gone */ }
      await proc.status;
    }
    await run(["ip", "netns", "del", ns]);
  }
}

const COREDNS = findProgram("coredns");
needsRoot.test({
  name: "build-image.sh --peer coredns: the static binary and the base's CA bundle, named for the lab",
  // Needs the CoreDNS build (tools/peers/build.sh coredns); lab_kube_test covers it under CI with the peers.
  ignore: !HAVE_MMDEBSTRAP || !COREDNS,
  sanitizeResources: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "flanctl-peer-image-" });
    try {
      const r = await run([`${ROOT}deploy/build-image.sh`, "--peer", "coredns", `${dir}/c.tar`]);
      assertEquals(r.code, 0, r.stderr.slice(-3000));
      assertStringIncludes(r.stdout, "image     flanctl.local/coredns:v1.15.0");
      const index = JSON.parse(await tarText(`${dir}/c.tar`, "index.json"));
      assertEquals(
        index.manifests[0].annotations["io.containerd.image.name"],
        "flanctl.local/coredns:v1.15.0",
      );
      const manifest = JSON.parse(
        await tarText(`${dir}/c.tar`, `blobs/sha256/${index.manifests[0].digest.slice(7)}`),
      );
      const config = JSON.parse(
        await tarText(`${dir}/c.tar`, `blobs/sha256/${manifest.config.digest.slice(7)}`),
      );
      assertEquals(config.config.Entrypoint, ["/coredns"]);
      const layer = `blobs/sha256/${manifest.layers[0].digest.slice(7)}`;
      const x = await run(["sh", "-c", `tar -xOf '${dir}/c.tar' '${layer}' | tar -t`]);
      assertEquals(x.stdout.trim().split("\n").sort(), [
        "coredns",
        "etc/",
        "etc/ssl/",
        "etc/ssl/certs/",
        "etc/ssl/certs/ca-certificates.crt",
      ]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
