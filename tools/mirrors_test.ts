/**
 * tools/mirrors.sh: the apt sources (one-line and deb822 files) read into mmdebstrap's source lines, the npm
 * registry and the Go proxies taken from the machine's configuration, and the one-line message naming what to
 * configure when there is none. Runs the bash functions on temporary files; no root.
 */
import { assertEquals, assertStringIncludes } from "../tests/assert.ts";

const SCRIPT = new URL("./mirrors.sh", import.meta.url).pathname;
/** bash from this process's PATH (the children get PATHs of their own, some without it). */
const BASH = (Deno.env.get("PATH") ?? "/usr/bin:/bin").split(":").map((d) => `${d}/bash`).find((f) => {
  try {
    return Deno.statSync(f).isFile;
  } catch {
    return false;
  }
}) ?? "/bin/bash";

interface Out {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `fn args...` after sourcing tools/mirrors.sh, with exactly `env` (and a PATH). */
async function call(fn: string, args: string[], env: Record<string, string> = {}): Promise<Out> {
  const o = await new Deno.Command(BASH, {
    args: ["-c", 'source "$1"; shift; "$@"', "_", SCRIPT, fn, ...args],
    env: { PATH: "/usr/bin:/bin", ...env },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: o.code, stdout: dec.decode(o.stdout), stderr: dec.decode(o.stderr) };
}

async function withFiles(
  files: Record<string, string>,
  fn: (paths: Record<string, string>) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-mirrors-" });
  try {
    const paths: Record<string, string> = {};
    for (const [name, text] of Object.entries(files)) {
      paths[name] = `${dir}/${name}`;
      await Deno.writeTextFile(paths[name], text);
    }
    await fn(paths);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const ONE_LINE = [
  "# a comment line",
  "deb http://m.example/debian bookworm main contrib # trailing comment",
  "deb-src http://m.example/debian bookworm main",
  "deb [ arch=amd64 signed-by=/usr/share/keyrings/m.gpg ] http://m.example/debian/ bookworm-updates main",
  "deb [signed-by=/k.gpg] http://m.example/debian-security bookworm-security main non-free-firmware",
  "deb http://m.example/debian bookworm-backports main",
  "deb http://m.example/debian bookworm contrib",
  "deb http://other.example/ubuntu noble main",
  "   deb http://m.example/debian bookworm main",
  "",
].join("\n");

const DEB822 = [
  "# deb822 with a comment",
  "Types: deb deb-src",
  "URIs: http://a.example/debian http://b.example/debian/",
  "Suites: bookworm",
  "  bookworm-updates",
  "Components: main",
  "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg",
  "",
  "Types: deb",
  "URIs: http://a.example/debian-security",
  "suites: bookworm-security",
  "components: main contrib",
  "signed-by:",
  " -----BEGIN PGP PUBLIC KEY BLOCK-----",
  " .",
  " mQINBF",
  " -----END PGP PUBLIC KEY BLOCK-----",
  "",
  "Types: deb",
  "URIs: http://disabled.example/debian",
  "Suites: bookworm",
  "Components: main",
  "Enabled: no",
  "",
  "Types: deb-src",
  "URIs: http://src.example/debian",
  "Suites: bookworm",
  "Components: main",
  "",
  "Types: deb",
  "URIs: http://nomain.example/debian",
  "Suites: bookworm",
  "Components: contrib", // no trailing newline: the last paragraph still counts
].join("\n");

Deno.test("apt_sources: one-line files: deb with main for the suite, -updates and -security, each once", async () => {
  await withFiles({ "sources.list": ONE_LINE }, async (p) => {
    const o = await call("apt_sources", ["bookworm", p["sources.list"]]);
    assertEquals(o.code, 0, o.stderr);
    assertEquals(o.stdout.trim().split("\n"), [
      "deb http://m.example/debian bookworm main",
      "deb [signed-by=/usr/share/keyrings/m.gpg] http://m.example/debian bookworm-updates main",
      "deb [signed-by=/k.gpg] http://m.example/debian-security bookworm-security main",
    ]);
  });
});

Deno.test("apt_sources: deb822 files: every URI and suite of an enabled deb paragraph with main", async () => {
  await withFiles({ "debian.sources": DEB822 }, async (p) => {
    const o = await call("apt_sources", ["bookworm", p["debian.sources"]]);
    assertEquals(o.code, 0, o.stderr);
    const key = "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]";
    assertEquals(o.stdout.trim().split("\n"), [
      `deb ${key} http://a.example/debian bookworm main`,
      `deb ${key} http://a.example/debian bookworm-updates main`,
      `deb ${key} http://b.example/debian bookworm main`,
      `deb ${key} http://b.example/debian bookworm-updates main`,
      // An embedded key is not a path: left to the keyrings apt trusts.
      "deb http://a.example/debian-security bookworm-security main",
    ]);
  });
});

Deno.test("apt_sources: both formats in one call, in file order, without duplicates", async () => {
  await withFiles({
    "a.list": "deb http://a.example/debian bookworm main\n",
    "b.sources": "Types: deb\nURIs: http://a.example/debian/\nSuites: bookworm bookworm-security\n" +
      "Components: main\n\nTypes: deb\nURIs: http://c.example/debian\nSuites: bookworm\nComponents: main\n",
  }, async (p) => {
    const o = await call("apt_sources", ["bookworm", p["a.list"], p["b.sources"]]);
    assertEquals(o.code, 0, o.stderr);
    assertEquals(o.stdout.trim().split("\n"), [
      "deb http://a.example/debian bookworm main",
      "deb http://a.example/debian bookworm-security main",
      "deb http://c.example/debian bookworm main",
    ]);
  });
});

Deno.test("apt_sources: without the suite itself, one line naming the suite, the files and the fix", async () => {
  await withFiles({
    "x.list": "deb http://m.example/debian-security bookworm-security main\n",
    "y.sources": "Types: deb\nURIs: http://m.example/ubuntu\nSuites: noble\nComponents: main\n",
  }, async (p) => {
    const o = await call("apt_sources", ["bookworm", p["x.list"], p["y.sources"]]);
    assertEquals(o.code, 1);
    assertEquals(o.stdout, "");
    assertEquals(o.stderr.trimEnd().split("\n").length, 1, o.stderr);
    assertStringIncludes(o.stderr, "no apt source for Debian bookworm main in ");
    assertStringIncludes(o.stderr, p["x.list"]);
    assertStringIncludes(o.stderr, "Suites: bookworm, Components: main");
  });
});

Deno.test("npm_registry: NPM_CONFIG_REGISTRY, else npm's own configuration, else a message", async () => {
  assertEquals(
    (await call("npm_registry", [], { NPM_CONFIG_REGISTRY: "https://npm.example/repo" })).stdout,
    "https://npm.example/repo/\n",
  );
  await withFiles(
    { npm: '#!/bin/sh\n[ "$*" = "config get registry" ] && echo https://npmrc.example/\n' },
    async (p) => {
      await Deno.chmod(p.npm, 0o755);
      const dir = p.npm.slice(0, p.npm.lastIndexOf("/"));
      const o = await call("npm_registry", [], { PATH: `${dir}:/usr/bin:/bin` });
      assertEquals(o.stdout, "https://npmrc.example/\n", o.stderr);
      await Deno.writeTextFile(p.npm, "#!/bin/sh\necho undefined\n");
      const none = await call("npm_registry", [], { PATH: `${dir}:/usr/bin:/bin` });
      assertEquals(none.code, 1);
      assertEquals(
        none.stderr,
        "no npm registry configured (got 'undefined'): run `npm config set registry URL` or set " +
          "NPM_CONFIG_REGISTRY=URL\n",
      );
    },
  );
  const noNpm = await call("npm_registry", [], { PATH: "/nonexistent" });
  assertEquals(noNpm.code, 1);
  assertStringIncludes(noNpm.stderr, "no npm registry configured: run `npm config set registry URL`");
});

Deno.test("go_proxies: the proxy URLs of a GOPROXY value; none is a message", async () => {
  assertEquals((await call("go_proxies", ["https://p.example,direct"])).stdout, "https://p.example\n");
  assertEquals(
    (await call("go_proxies", ["https://a.example/go|https://b.example,off"])).stdout,
    "https://a.example/go,https://b.example\n",
  );
  assertEquals((await call("go_proxies", ["file:///srv/goproxy"])).stdout, "file:///srv/goproxy\n");
  for (const v of ["direct", "off", ""]) {
    const o = await call("go_proxies", [v]);
    assertEquals(o.code, 1, v);
    assertEquals(o.stdout, "");
    assertStringIncludes(o.stderr, "no Go module proxy configured");
    assertStringIncludes(o.stderr, "run `go env -w GOPROXY=URL` or set GOPROXY=URL");
  }
});

/**
 * Host names that look like a package registry, Go module proxy or distribution mirror: a dotted name under a
 * public top-level domain with a label naming one. Reserved example names (example.com/.org/.net) and
 * Kubernetes' configuration API groups (`<component>.config.k8s.io`, e.g. kube-proxy's) are not hosts.
 */
export function registryHosts(text: string): string[] {
  const out: string[] = [];
  const host = /\b(?:[a-z0-9-]+\.)+(?:com|org|net|io|dev|cn|de|eu|uk|fr|jp|ru|info|co|land)\b/gi;
  for (const m of text.matchAll(host)) {
    const name = m[0].toLowerCase();
    if (/(^|\.)example\.(com|org|net)$/.test(name) || /^[a-z0-9-]+\.config\.k8s\.io$/.test(name)) continue;
    const labels = name.split(".").slice(0, -1);
    if (
      labels.some((l) =>
        /registry|npmjs|yarnpkg|proxy|mirror|debian|ubuntu|pypi|rubygems|crates|maven/.test(l)
      )
    ) {
      out.push(name);
    }
  }
  return out;
}

Deno.test("registryHosts: finds registry-, proxy- and mirror-like hosts, not example names or paths", () => {
  // Made-up names, joined here so that this file names no host itself.
  const h = (...labels: string[]) => labels.join(".");
  const hosts = [
    h("registry", "acme-corp", "com"),
    h("goproxy", "acme-corp", "io"),
    h("ftp", "de", "debian-mirror", "net"),
    h("npm", "registry-host", "org"),
  ];
  assertEquals(
    registryHosts(
      `curl https://${hosts[0]}/x; GOPROXY=https://${hosts[1]},direct; deb http://${hosts[2]}/debian; ` +
        `cache/npm/${hosts[3]}/@esbuild`,
    ),
    hosts,
  );
  const reserved = h("registry", "example", "com"); // reserved for examples (RFC 2606), never a real host
  assertEquals(registryHosts(`https://${reserved}/a lib/store/proxy.ts golang.org/toolchain`), []);
  // An API group is no host, but a registry under the same domain is.
  assertEquals(registryHosts(`apiVersion: ${h("kubeproxy", "config", "k8s", "io")}/v1alpha1`), []);
  assertEquals(registryHosts(h("proxy", "k8s", "io")), [h("proxy", "k8s", "io")]);
});

Deno.test("the repository names no package-registry host (mirrors come from the machine)", () => {
  const root = new URL("..", import.meta.url).pathname;
  const found: string[] = [];
  const walk = (rel: string): void => {
    for (const e of Deno.readDirSync(`${root}${rel}`)) {
      const path = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory && ![".git", "dist", "node_modules"].includes(e.name)) walk(path);
      else if (e.isFile) {
        const bytes = Deno.readFileSync(`${root}${path}`);
        if (bytes.includes(0)) continue; // binary
        for (const h of registryHosts(new TextDecoder().decode(bytes))) found.push(`${path}: ${h}`);
      }
    }
  };
  walk("");
  assertEquals(found, []);
});
