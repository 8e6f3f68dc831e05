/**
 * A real Kubernetes control plane for tests: etcd, kube-apiserver (client-certificate authentication,
 * service-account keys, `--authorization-mode=Node,RBAC`, NodeRestriction) and optionally
 * kube-controller-manager (`--allocate-node-cidrs`: podCIDRs come from Kubernetes), all inside one network
 * namespace the caller made (the lab's or a test's underlay). Binaries from tests/peers.ts (built by
 * `install.sh --dev`); certificates made with openssl in a temp dir. Everything started here is stopped by
 * {@link KubeControlPlane.stop}, also after a failed start.
 *
 * ```ts
 * const cp = await KubeControlPlane.start({ netns: underlay, address: "10.96.0.1" });
 * await cp.kubectl("apply", "-f", "deploy/kube-flanctl.yml");
 * const token = await cp.token("kube-flannel", "flannel");        // a ServiceAccount token
 * await Deno.writeTextFile(path, cp.kubeconfig({ token }));       // or { tokenFile } / admin certificates
 * await cp.stop();
 * ```
 * @module
 */
import { nsRun } from "./netns.ts";
import { peerPath } from "./peers.ts";
import { waitFor } from "./daemon_fixture.ts";

/** Options of {@link KubeControlPlane.start}. */
export interface KubeControlPlaneOptions {
  /** The (test-made) network namespace to run in. */
  netns: string;
  /** The address the API server serves on in that namespace (nodes reach it there); must exist there. */
  address: string;
  /** API server port (default 6443). */
  port?: number;
  /** etcd client port on the namespace's loopback (default 2379; peers on port + 1). */
  etcdPort?: number;
  /** Also run kube-controller-manager's node-ipam-controller with this cluster CIDR (e.g. 10.244.0.0/16). */
  clusterCidr?: string;
  /** Node CIDR mask size for the controller manager (default 24). */
  nodeCidrMaskSize?: number;
  /** Extra kube-apiserver flags (e.g. `--min-request-timeout=15`, `--watch-cache=false`). */
  apiserverArgs?: string[];
  /** Where certificates, data and logs go (default: a new temp dir, removed by stop()). */
  dir?: string;
}

/** Runs `cmd` (an argv) and throws with its stderr when it fails. */
async function must(cmd: string[], what: string): Promise<string> {
  const out = await new Deno.Command(cmd[0], { args: cmd.slice(1), stdout: "piped", stderr: "piped" })
    .output();
  const dec = new TextDecoder();
  if (!out.success) throw new Error(`${what} failed: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout);
}

/** A running control plane. */
export class KubeControlPlane {
  readonly opts: Required<Omit<KubeControlPlaneOptions, "clusterCidr" | "apiserverArgs">> & {
    clusterCidr?: string;
    apiserverArgs: string[];
  };
  readonly #ownDir: boolean;
  readonly #procs: { name: string; p: Deno.ChildProcess; argv: string[] }[] = [];
  /** The API server's URL as the nodes reach it. */
  readonly url: string;

  private constructor(o: KubeControlPlaneOptions, dir: string, ownDir: boolean) {
    this.opts = {
      port: 6443,
      etcdPort: 2379,
      nodeCidrMaskSize: 24,
      ...o,
      dir,
      apiserverArgs: o.apiserverArgs ?? [],
    };
    this.#ownDir = ownDir;
    this.url = `https://${o.address}:${this.opts.port}`;
  }

  /** The files it made: CA, server and admin certificates, service-account keys, admin kubeconfig. */
  get files() {
    const d = this.opts.dir;
    return {
      ca: `${d}/ca.crt`,
      caKey: `${d}/ca.key`,
      serverCert: `${d}/server.crt`,
      serverKey: `${d}/server.key`,
      adminCert: `${d}/admin.crt`,
      adminKey: `${d}/admin.key`,
      saKey: `${d}/sa.key`,
      saPub: `${d}/sa.pub`,
      adminKubeconfig: `${d}/admin.kubeconfig`,
    };
  }

  /** Starts etcd, kube-apiserver (and the controller manager when `clusterCidr` is given); waits for /readyz. */
  static async start(o: KubeControlPlaneOptions): Promise<KubeControlPlane> {
    const own = !o.dir;
    const dir = o.dir ?? await Deno.makeTempDir({ prefix: "flanctl-kube-" });
    await Deno.mkdir(dir, { recursive: true });
    const cp = new KubeControlPlane(o, dir, own);
    try {
      await cp.#certs();
      await cp.#startEtcd();
      cp.#startApiserver();
      await Deno.writeTextFile(cp.files.adminKubeconfig, cp.kubeconfig({ admin: true }));
      await waitFor(
        () => `kube-apiserver ready\n${cp.logTail("kube-apiserver")}`,
        async () => (await cp.kubectl("get", "--raw", "/readyz")).code === 0,
        90_000,
      );
      if (o.clusterCidr) await cp.#startControllerManager();
      return cp;
    } catch (e) {
      await cp.stop();
      throw e;
    }
  }

  async #certs(): Promise<void> {
    const f = this.files, o = this.opts;
    const ssl = (...a: string[]) => must(["openssl", ...a], `openssl ${a[0]}`);
    await ssl(
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      f.caKey,
      "-out",
      f.ca,
      "-days",
      "2",
      "-subj",
      "/CN=flanctl-test-ca",
    );
    const leaf = async (name: string, subj: string, ext: string) => {
      const d = this.opts.dir;
      await Deno.writeTextFile(`${d}/${name}.ext`, ext);
      await ssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        `${d}/${name}.key`,
        "-out",
        `${d}/${name}.csr`,
        "-subj",
        subj,
      );
      await ssl(
        "x509",
        "-req",
        "-in",
        `${d}/${name}.csr`,
        "-CA",
        f.ca,
        "-CAkey",
        f.caKey,
        "-CAcreateserial",
        "-out",
        `${d}/${name}.crt`,
        "-days",
        "2",
        "-extfile",
        `${d}/${name}.ext`,
      );
    };
    await leaf(
      "server",
      "/CN=kube-apiserver",
      `subjectAltName=IP:${o.address},IP:127.0.0.1,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,` +
        `DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n`,
    );
    await leaf("admin", "/O=system:masters/CN=flanctl-test-admin", "extendedKeyUsage=clientAuth\n");
    await ssl("genrsa", "-out", f.saKey, "2048");
    await ssl("rsa", "-in", f.saKey, "-pubout", "-out", f.saPub);
  }

  #spawn(name: string, argv: string[]): void {
    const log = Deno.openSync(`${this.opts.dir}/${name}.log`, { write: true, create: true, append: true });
    const p = new Deno.Command("ip", {
      args: ["netns", "exec", this.opts.netns, ...argv],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    // The log file is the component's stderr (read by logTail when something fails).
    p.stderr.pipeTo(log.writable).catch(() => {});
    this.#procs.push({ name, p, argv });
  }

  /**
   * Restarts the API server (SIGTERM, same flags, same etcd) and waits for /readyz: clients' watches break and
   * resume against a fresh watch cache (a resourceVersion older than its start: 410, a re-list).
   */
  async restartApiserver(): Promise<void> {
    const i = this.#procs.findIndex((x) => x.name === "kube-apiserver");
    if (i < 0) throw new Error("kube-apiserver is not running");
    const [{ p, argv }] = this.#procs.splice(i, 1);
    try {
      p.kill("SIGTERM");
    } catch { /* gone */ }
    await p.status;
    this.#spawn("kube-apiserver", argv);
    await waitFor(
      () => `kube-apiserver ready again\n${this.logTail("kube-apiserver")}`,
      async () => (await this.kubectl("get", "--raw", "/readyz")).code === 0,
      90_000,
    );
  }

  /** The last lines of a component's log (`etcd`, `kube-apiserver`, `kube-controller-manager`). */
  logTail(name: string, lines = 30): string {
    try {
      return Deno.readTextFileSync(`${this.opts.dir}/${name}.log`).trimEnd().split("\n").slice(-lines).join(
        "\n",
      );
    } catch {
      return "(no log)";
    }
  }

  async #startEtcd(): Promise<void> {
    const p = this.opts.etcdPort, url = `http://127.0.0.1:${p}`;
    this.#spawn("etcd", [
      "etcd",
      ...["--data-dir", `${this.opts.dir}/etcd`, "--listen-client-urls", url, "--advertise-client-urls", url],
      ...[
        "--listen-peer-urls",
        `http://127.0.0.1:${p + 1}`,
        "--initial-advertise-peer-urls",
        `http://127.0.0.1:${p + 1}`,
      ],
      ...["--initial-cluster", `default=http://127.0.0.1:${p + 1}`],
    ]);
    await waitFor(
      () => `etcd up\n${this.logTail("etcd")}`,
      async () =>
        (await nsRun(this.opts.netns, ["etcdctl", "--endpoints", url, "endpoint", "health"])).code === 0,
      30_000,
    );
  }

  #startApiserver(): void {
    const f = this.files, o = this.opts;
    this.#spawn("kube-apiserver", [
      peerPath("kube-apiserver"),
      `--etcd-servers=http://127.0.0.1:${o.etcdPort}`,
      `--bind-address=${o.address}`,
      `--advertise-address=${o.address}`,
      `--secure-port=${o.port}`,
      `--client-ca-file=${f.ca}`,
      `--tls-cert-file=${f.serverCert}`,
      `--tls-private-key-file=${f.serverKey}`,
      "--service-account-issuer=https://kubernetes.default.svc",
      `--service-account-key-file=${f.saPub}`,
      `--service-account-signing-key-file=${f.saKey}`,
      "--authorization-mode=Node,RBAC",
      "--enable-admission-plugins=NodeRestriction",
      "--allow-privileged=true",
      "--service-cluster-ip-range=10.96.0.0/16",
      `--cert-dir=${o.dir}/apiserver-certs`,
      ...o.apiserverArgs,
    ]);
  }

  async #startControllerManager(): Promise<void> {
    const o = this.opts;
    this.#spawn("kube-controller-manager", [
      peerPath("kube-controller-manager"),
      `--kubeconfig=${this.files.adminKubeconfig}`,
      "--controllers=node-ipam-controller",
      "--allocate-node-cidrs=true",
      `--cluster-cidr=${o.clusterCidr}`,
      `--node-cidr-mask-size=${o.nodeCidrMaskSize}`,
      "--leader-elect=false",
      "--secure-port=0",
      "--use-service-account-credentials=true",
      `--service-cluster-ip-range=10.96.0.0/16`,
    ]);
    await new Promise((r) => setTimeout(r, 500));
    const cm = this.#procs.find((x) => x.name === "kube-controller-manager")!;
    const done = await Promise.race([cm.p.status.then(() => true), Promise.resolve(false)]);
    if (done) throw new Error(`kube-controller-manager exited:\n${this.logTail("kube-controller-manager")}`);
  }

  /**
   * A kubeconfig reaching the API server: as the admin (client certificate, system:masters), or with a bearer
   * `token`, or a `tokenFile` (re-read by clients when it changes: a rotated token).
   */
  kubeconfig(who: { admin: true } | { token: string } | { tokenFile: string }): string {
    const user = "admin" in who
      ? `client-certificate: ${this.files.adminCert}\n    client-key: ${this.files.adminKey}`
      : "token" in who
      ? `token: ${who.token}`
      : `tokenFile: ${who.tokenFile}`;
    return `apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: t\n  cluster:\n` +
      `    server: ${this.url}\n    certificate-authority: ${this.files.ca}\ncontexts:\n- name: t\n` +
      `  context: {cluster: t, user: u}\nusers:\n- name: u\n  user:\n    ${user}\n`;
  }

  /** Runs the built kubectl as the admin inside the namespace; code, stdout, stderr. */
  kubectl(...args: string[]) {
    return nsRun(this.opts.netns, [
      peerPath("kubectl"),
      `--kubeconfig=${this.files.adminKubeconfig}`,
      ...args,
    ]);
  }

  /** Like {@link kubectl}, but throws with stderr on failure; returns stdout. */
  async kubectlOk(...args: string[]): Promise<string> {
    const r = await this.kubectl(...args);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
  }

  /** A ServiceAccount token (`kubectl create token`), optionally bound to a Secret (deleting it revokes it). */
  async token(namespace: string, sa: string, boundSecret?: string): Promise<string> {
    const bound = boundSecret ? ["--bound-object-kind", "Secret", "--bound-object-name", boundSecret] : [];
    return (await this.kubectlOk("create", "token", sa, "-n", namespace, "--duration", "2h", ...bound))
      .trim();
  }

  /** Creates (or replaces) Node `name` with the given podCIDR(s) and annotations. */
  async upsertNode(name: string, podCIDRs: string[] = [], annotations: Record<string, string> = {}) {
    const node = {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name, annotations },
      spec: podCIDRs.length ? { podCIDR: podCIDRs[0], podCIDRs } : {},
    };
    const path = `${this.opts.dir}/node-${name}.json`;
    await Deno.writeTextFile(path, JSON.stringify(node));
    return await this.kubectlOk("apply", "-f", path);
  }

  /** The Node object `name` (admin view), or null. */
  async node(name: string): Promise<
    {
      metadata: { annotations?: Record<string, string>; resourceVersion: string };
      spec: { podCIDR?: string; podCIDRs?: string[] };
      status?: { conditions?: { type: string; status: string; reason?: string }[] };
    } | null
  > {
    const r = await this.kubectl("get", "node", name, "-o", "json");
    return r.code === 0 ? JSON.parse(r.stdout) : null;
  }

  /** Stops every component (SIGTERM, then SIGKILL) and removes the temp dir it made. Never throws. */
  async stop(): Promise<void> {
    for (const { p } of this.#procs.reverse()) {
      try {
        p.kill("SIGTERM");
      } catch { /* gone */ }
      const t = setTimeout(() => {
        try {
          p.kill("SIGKILL");
        } catch { /* gone */ }
      }, 5000);
      await p.status.catch(() => {});
      clearTimeout(t);
    }
    this.#procs.length = 0;
    if (this.#ownDir) await Deno.remove(this.opts.dir, { recursive: true }).catch(() => {});
  }
}
