/**
 * The real peers the tests run beside flanctl: where their binaries are and whether a test can use them.
 *
 * Go programs (Kubernetes, flanneld, crictl, cnitool, kube-router) are built by `install.sh --dev`
 * (tools/peers/build.sh) into `$FLANCTL_DEV_CACHE/<name>-<version>/bin` (default /var/cache/flanctl-dev), the
 * versions pinned in that script; Debian's (etcd, containerd, runc, ctr, ...) come from PATH. Lookup order for
 * a binary NAME: `FLANCTL_PEER_<NAME>` (upper case, `-` as `_`, e.g. FLANCTL_PEER_KUBE_APISERVER) naming a
 * file, then the cache directory of the pinned version, then PATH — for the Go programs only a PATH binary that prints the
 * pinned version (a `flanneld` on PATH may be flanctl's own launcher name, a `kubectl` another release;
 * cnitool prints no version: only the cache's). The reference CNI plugins the side-by-side tests compare
 * against: {@link refCniDir}.
 *
 * A test that needs peers passes `ignore: !requirePeers([...])`: under CI (`CI=true`) a missing peer
 * registers a failing test named after it (the suite cannot pass without them), elsewhere a warning says
 * what is skipped and why.
 */

/** The Go programs built by tools/peers/build.sh, by the build ("component") they come from. */
export const GO_PEERS = {
  "kube-apiserver": "kubernetes",
  "kube-controller-manager": "kubernetes",
  "kubelet": "kubernetes",
  "kubectl": "kubernetes",
  "flanneld": "flanneld",
  "crictl": "crictl",
  "cnitool": "cnitool",
  "kube-router": "kube-router",
} as const;

/** Peers installed as Debian packages by `install.sh --dev`, with the package that has them. */
export const DEBIAN_PEERS = {
  "etcd": "etcd-server",
  "etcdctl": "etcd-client",
  "containerd": "containerd",
  "ctr": "containerd",
  "runc": "runc",
  "mmdebstrap": "mmdebstrap",
  "umoci": "umoci",
  "skopeo": "skopeo",
  "buildah": "buildah",
  "busybox": "busybox-static",
  "ipset": "ipset",
} as const;

export type GoPeer = keyof typeof GO_PEERS;
export type DebianPeer = keyof typeof DEBIAN_PEERS;
export type Peer = GoPeer | DebianPeer;
type Component = typeof GO_PEERS[GoPeer] | "cni-plugins";

const BUILD_SCRIPT = new URL("../tools/peers/build.sh", import.meta.url);

/** The directory builds are cached in (FLANCTL_DEV_CACHE or /var/cache/flanctl-dev). */
export function devCacheDir(): string {
  return Deno.env.get("FLANCTL_DEV_CACHE") || "/var/cache/flanctl-dev";
}

let versions: Record<Component, string> | undefined;
/** The pinned versions, read from tools/peers/build.sh (the one place they are written). */
export function peerVersions(): Record<Component, string> {
  if (versions) return versions;
  const text = Deno.readTextFileSync(BUILD_SCRIPT);
  const pick = (v: string) => {
    const m = text.match(new RegExp(`^${v}=(v[0-9][0-9A-Za-z.+-]*)$`, "m"));
    if (!m) throw new Error(`tools/peers/build.sh has no ${v}= line`);
    return m[1];
  };
  versions = {
    kubernetes: pick("K8S_VERSION"),
    flanneld: pick("FLANNEL_VERSION"),
    crictl: pick("CRICTL_VERSION"),
    cnitool: pick("CNITOOL_VERSION"),
    "cni-plugins": pick("CNI_PLUGINS_VERSION"),
    "kube-router": pick("KUBE_ROUTER_VERSION"),
  };
  return versions;
}

/** The cache directory holding `name`'s build: `<cache>/<component>-<version>/bin`. */
export function peerBinDir(name: GoPeer): string {
  const c = GO_PEERS[name];
  return `${devCacheDir()}/${c}-${peerVersions()[c]}/bin`;
}

function isExecutable(path: string): boolean {
  try {
    const st = Deno.statSync(path);
    return st.isFile && ((st.mode ?? 0o755) & 0o111) !== 0;
  } catch {
    return false;
  }
}

function onPath(name: string): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir && isExecutable(`${dir}/${name}`)) return `${dir}/${name}`;
  }
  return undefined;
}

/** Whether the Go program at `path` prints `version` (its own `--version`, or `kubectl version --client`). */
function printsVersion(name: GoPeer, path: string, version: string): boolean {
  if (name === "cnitool") return false; // it prints no version: only the cache's build is known to be it
  const args = name === "kubectl" ? ["version", "--client"] : ["--version"];
  try {
    const out = new Deno.Command(path, { args, stdout: "piped", stderr: "piped", stdin: "null" })
      .outputSync();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    return new RegExp(`(^|[^0-9.])${version.replace(/\./g, "\\.")}($|[^0-9.])`, "m").test(text) ||
      new RegExp(`(^|[^0-9.])${version.slice(1).replace(/\./g, "\\.")}($|[^0-9.])`, "m").test(text);
  } catch {
    return false;
  }
}

const found = new Map<Peer, string | undefined>();

/** Forgets earlier lookups (tests of this module change the environment between them). */
export function forgetPeers(): void {
  found.clear();
}

/** Where `name` is (see the module's lookup order), or undefined when it is not installed. */
export function findPeer(name: Peer): string | undefined {
  if (found.has(name)) return found.get(name);
  let path: string | undefined;
  const override = Deno.env.get(`FLANCTL_PEER_${name.toUpperCase().replace(/-/g, "_")}`);
  if (override) {
    path = isExecutable(override) ? override : undefined;
  } else if (name in GO_PEERS) {
    const go = name as GoPeer;
    const cached = `${peerBinDir(go)}/${go}`;
    if (isExecutable(cached)) path = cached;
    else {
      const p = onPath(go);
      if (p && printsVersion(go, p, peerVersions()[GO_PEERS[go]])) path = p;
    }
  } else {
    path = onPath(name);
  }
  found.set(name, path);
  return path;
}

/** `name`'s path; throws naming how to get it when it is not installed. */
export function peerPath(name: Peer): string {
  const p = findPeer(name);
  if (!p) throw new Error(whyMissing([name]));
  return p;
}

/** The peers among `names` that are not installed. */
export function missingPeers(names: readonly Peer[]): Peer[] {
  return names.filter((n) => !findPeer(n));
}

function whyMissing(missing: readonly Peer[]): string {
  const parts = missing.map((n) => {
    if (n in GO_PEERS) {
      const go = n as GoPeer;
      return `${n} (not in ${peerBinDir(go)}, nor a ${peerVersions()[GO_PEERS[go]]} on PATH)`;
    }
    return `${n} (Debian package ${DEBIAN_PEERS[n as DebianPeer]}, not on PATH)`;
  });
  return `real peers missing: ${parts.join(", ")} — run ./install.sh --dev (or tools/peers/build.sh)`;
}

/**
 * Whether tests needing every peer in `names` can run. When some are missing: under CI (`env` = "true") a
 * test named after them is registered that fails; elsewhere a warning says what is skipped. Callers pass
 * `ignore: !requirePeers([...])`.
 */
export function requirePeers(names: readonly Peer[], env = Deno.env.get("CI")): boolean {
  const missing = missingPeers(names);
  if (!missing.length) return true;
  const what = whyMissing(missing);
  if (env === "true") {
    Deno.test(`tests with real peers need ${missing.join(", ")}`, () => {
      throw new Error(`${what}; under CI the tests with real peers may not be skipped`);
    });
  } else {
    console.error(`warning: ${what}; skipping the tests that need them`);
  }
  return false;
}

/** Debian's containernetworking-plugins (1.1.1 here): the fallback reference when the v1.10 build is absent. */
export const DEBIAN_REF_CNI_DIR = "/usr/lib/cni";

/** Where the reference CNI plugins the tests and benches compare against are, and which build they are. */
export interface RefCniDir {
  /** The directory holding bridge, host-local, loopback, portmap, ptp. */
  dir: string;
  /** "override" (FLANCTL_REF_CNI_DIR), "build" (the cache's pinned version) or "debian" (/usr/lib/cni). */
  source: "override" | "build" | "debian";
  /** For the log and skip messages: e.g. "v1.10.0 built by tools/peers/build.sh in /var/cache/…/bin". */
  label: string;
}

/** The cache directory of the pinned reference CNI plugins: `<cache>/cni-plugins-<version>/bin`. */
export function refCniBuildDir(): string {
  return `${devCacheDir()}/cni-plugins-${peerVersions()["cni-plugins"]}/bin`;
}

/**
 * The reference CNI plugins: FLANCTL_REF_CNI_DIR when set, then the pinned release built into the cache by
 * `tools/peers/build.sh cni-plugins` (install.sh --dev) when its build finished (the `stamp` beside bin/),
 * else Debian's /usr/lib/cni.
 */
export function refCniDir(): RefCniDir {
  const override = Deno.env.get("FLANCTL_REF_CNI_DIR");
  if (override) return { dir: override, source: "override", label: `FLANCTL_REF_CNI_DIR=${override}` };
  const built = refCniBuildDir();
  let stamped = false;
  try {
    stamped = Deno.statSync(built.replace(/\/bin$/, "/stamp")).isFile;
  } catch { /* not built */ }
  const v = peerVersions()["cni-plugins"];
  if (stamped) {
    return { dir: built, source: "build", label: `${v} built by tools/peers/build.sh in ${built}` };
  }
  return {
    dir: DEBIAN_REF_CNI_DIR,
    source: "debian",
    label:
      `Debian's containernetworking-plugins in ${DEBIAN_REF_CNI_DIR} (the ${v} build is not in ${built}: ` +
      `tools/peers/build.sh cni-plugins, or ./install.sh --dev)`,
  };
}
