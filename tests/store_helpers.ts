/**
 * Helpers for the store tests: many acquiring processes, waiting for watch events with a deadline, and a
 * throwaway etcd server on free loopback ports.
 * @module
 */
import type { LeaseEvent } from "../lib/store/types.ts";
import type { StoreOptions } from "../lib/store/open.ts";
import { run, type RunResult } from "./netns.ts";

const ROOT = new URL("..", import.meta.url).pathname;

/** A net-conf with room for exactly 50 /24 subnets (10.5.1.0 … 10.5.50.0). */
export const NET50 = JSON.stringify({
  Network: "10.5.0.0/16",
  SubnetLen: 24,
  SubnetMin: "10.5.1.0",
  SubnetMax: "10.5.50.0",
  Backend: { Type: "vxlan" },
});

/** Result of one acquiring process. */
export interface AcquireResult {
  subnet?: string;
  error?: string;
}

/**
 * Runs `n` separate `deno run` processes at once, each opening the store from `opts` and acquiring a lease
 * with PublicIP 10.250.x.y. Returns what each printed.
 */
export async function acquireInProcesses(opts: StoreOptions, n: number): Promise<AcquireResult[]> {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-acq-" });
  const script = `${dir}/acquire.ts`;
  await Deno.writeTextFile(
    script,
    `import { openStore } from "${ROOT}lib/store/open.ts";
const [opts, ip] = [JSON.parse(Deno.args[0]), Deno.args[1]];
const s = await openStore(opts);
try {
  const l = await s.acquireLease({ PublicIP: ip, PublicIPv6: null, BackendType: "vxlan", BackendData: { VNI: 1 } });
  console.log(JSON.stringify({ subnet: String(l.subnet) }));
} catch (e) {
  console.log(JSON.stringify({ error: String(e?.message ?? e) }));
} finally {
  await s.close();
}
Deno.exit(0);
`,
  );
  try {
    const outs = await Promise.all(
      Array.from(
        { length: n },
        (_, i) =>
          run(denoRunArgv(script, JSON.stringify(opts), `10.250.${Math.floor(i / 250)}.${(i % 250) + 1}`)),
      ),
    );
    return outs.map((o) => {
      const text = o.stdout.trim();
      try {
        return JSON.parse(text.split("\n").pop()!) as AcquireResult;
      } catch {
        return { error: `exit ${o.code}: ${text} ${o.stderr}` };
      }
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Reads batches from a watch iterator until `pred` holds for the events gathered (returns them all), or
 * fails after `timeoutMs`.
 */
export async function nextEvents(
  it: AsyncIterator<LeaseEvent[]>,
  pred: (evs: LeaseEvent[]) => boolean,
  timeoutMs = 30_000,
): Promise<LeaseEvent[]> {
  const got: LeaseEvent[] = [];
  const deadline = Date.now() + timeoutMs;
  while (!pred(got)) {
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new Error(`no matching watch event within ${timeoutMs} ms; got ${JSON.stringify(got)}`);
    }
    let t: ReturnType<typeof setTimeout> | undefined;
    const r = await Promise.race([
      it.next(),
      new Promise<"timeout">((res) => t = setTimeout(() => res("timeout"), left)),
    ]);
    clearTimeout(t);
    if (r === "timeout") continue;
    if (r.done) throw new Error(`watch ended early; got ${JSON.stringify(got)}`);
    got.push(...r.value);
  }
  return got;
}

/**
 * Where test processes reserve the loopback ports their etcd fixtures chose: one file per port (holding the
 * reserving pid) from the choice until cleanup(). A free port cannot be held across processes until etcd
 * binds it, so without this two fixtures (in parallel test files) could choose the same port — or one
 * could take the port of an etcd another test has killed and is about to restart.
 */
const PORT_DIR = `${Deno.env.get("TMPDIR") || "/tmp"}/flanctl-test-ports`;

/** Reserves `port` for this process; false when another live process holds it. */
function reservePort(port: number): boolean {
  Deno.mkdirSync(PORT_DIR, { recursive: true });
  const file = `${PORT_DIR}/${port}`;
  for (let i = 0; i < 2; i++) {
    try {
      Deno.writeTextFileSync(file, `${Deno.pid}\n`, { createNew: true });
      return true;
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    }
    // Left by a process that is gone (killed before its cleanup): taken over.
    const pid = Number(Deno.readTextFileSync(file).trim());
    if (pid > 0 && isAlive(pid)) return false;
    Deno.removeSync(file);
  }
  return false;
}

function isAlive(pid: number): boolean {
  try {
    Deno.statSync(`/proc/${pid}`);
    return true;
  } catch {
    return false;
  }
}

/** Ends the reservation of `port` (when this process holds it). */
function releasePort(port: number): void {
  const file = `${PORT_DIR}/${port}`;
  try {
    if (Number(Deno.readTextFileSync(file).trim()) === Deno.pid) Deno.removeSync(file);
  } catch { /* not reserved */ }
}

/** A free TCP port on 127.0.0.1, reserved for this process until {@link releasePort}. */
function freePort(): number {
  // Below the kernel's ephemeral range (32768-60999): a port from port 0 is an ephemeral one, and while a
  // test has etcd killed, any outgoing connection (the store's own reconnects, other tests' clients) may
  // take it as its local port, so the restarted etcd cannot bind it.
  for (let i = 0; i < 100; i++) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    if (!reservePort(port)) continue;
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch (e) {
      releasePort(port);
      if (!(e instanceof Deno.errors.AddrInUse)) throw e;
    }
  }
  throw new Error("no free loopback port in 20000-31999");
}

/** TLS material for an etcd fixture (PEM file paths). */
export interface EtcdTls {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/**
 * Makes a throwaway CA, a server cert for 127.0.0.1 and a client cert with openssl in `dir`. The server
 * cert also carries clientAuth: etcd's JSON gateway dials its own gRPC port with it under --client-cert-auth.
 */
export async function makeTls(dir: string): Promise<EtcdTls> {
  const ossl = async (...args: string[]) => {
    const o = await new Deno.Command("openssl", { args, stdout: "null", stderr: "piped", cwd: dir }).output();
    if (!o.success) throw new Error(`openssl ${args.join(" ")}: ${new TextDecoder().decode(o.stderr)}`);
  };
  await ossl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-days",
    "2",
    "-subj",
    "/CN=flanctl-test-ca",
  );
  for (
    const [name, ext] of [["server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth"], [
      "client",
      "extendedKeyUsage=clientAuth",
    ]]
  ) {
    await Deno.writeTextFile(`${dir}/${name}.ext`, ext.replace("\\n", "\n") + "\n");
    await ossl(
      "req",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      `${name}.key`,
      "-out",
      `${name}.csr`,
      "-subj",
      `/CN=${name === "server" ? "127.0.0.1" : "root"}`,
    );
    await ossl(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.pem`,
      "-days",
      "2",
      "-extfile",
      `${name}.ext`,
    );
  }
  return {
    ca: `${dir}/ca.pem`,
    serverCert: `${dir}/server.pem`,
    serverKey: `${dir}/server.key`,
    clientCert: `${dir}/client.pem`,
    clientKey: `${dir}/client.key`,
  };
}

/** A throwaway etcd on loopback with its own data dir (optionally TLS with client certificates). */
export class EtcdFixture {
  /** Client URL. */
  readonly url: string;
  readonly #peerPort: number;
  readonly #clientPort: number;
  /** The member name, unique: start() checks that the etcd answering on our port is this one. */
  readonly #name = `t${crypto.randomUUID().slice(0, 8)}`;
  readonly #tls: EtcdTls | undefined;
  #dataDir = "";
  #proc: Deno.ChildProcess | null = null;
  /** etcd's stderr, read to its end (for the error when it exits during start()). */
  #stderr: Promise<string> = Promise.resolve("");

  readonly #extra: string[];

  /** `extraArgs` are added to etcd's command line (e.g. `--quota-backend-bytes=…`). */
  constructor(tls?: EtcdTls, extraArgs: string[] = []) {
    this.#clientPort = freePort();
    this.#peerPort = freePort(); // not the client port: that one is reserved now
    this.#tls = tls;
    this.#extra = extraArgs;
    this.url = `${tls ? "https" : "http"}://127.0.0.1:${this.#clientPort}`;
  }

  #tlsArgs(): string[] {
    const t = this.#tls;
    return t
      ? [
        `--cert-file=${t.serverCert}`,
        `--key-file=${t.serverKey}`,
        `--trusted-ca-file=${t.ca}`,
        "--client-cert-auth",
      ]
      : [];
  }

  #ctlTlsArgs(): string[] {
    const t = this.#tls;
    return t ? [`--cacert=${t.ca}`, `--cert=${t.clientCert}`, `--key=${t.clientKey}`] : [];
  }

  /**
   * Starts etcd (again, on the same data dir) and waits until it answers as this fixture's member: a port
   * taken meanwhile (another test's etcd chose it between our check and our bind) fails at once, naming it,
   * instead of the test talking to the other etcd. (Called before auth is enabled: `member list` then needs
   * no credentials.)
   */
  async start(): Promise<void> {
    if (!this.#dataDir) this.#dataDir = await Deno.makeTempDir({ prefix: "flanctl-etcd-" });
    const peer = `http://127.0.0.1:${this.#peerPort}`;
    this.#proc = new Deno.Command("/usr/bin/etcd", {
      args: [
        `--name=${this.#name}`,
        `--data-dir=${this.#dataDir}`,
        `--listen-client-urls=${this.url}`,
        `--advertise-client-urls=${this.url}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=${this.#name}=${peer}`,
        "--log-level=error",
        ...this.#tlsArgs(),
        ...this.#extra,
      ],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const proc = this.#proc;
    const stderr = this.#stderr = new Response(proc.stderr).text();
    const exit: { status: Deno.CommandStatus | null } = { status: null };
    proc.status.then((st) => exit.status = st);
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (exit.status) {
        throw new Error(
          `etcd exited (code ${exit.status.code}) on ports ${this.#clientPort}/${this.#peerPort}: ${await stderr}`,
        );
      }
      const o = await new Deno.Command("/usr/bin/etcdctl", {
        args: [`--endpoints=${this.url}`, ...this.#ctlTlsArgs(), "member", "list"],
        env: { ETCDCTL_API: "3" },
        stdout: "piped",
        stderr: "null",
      }).output();
      if (o.success) {
        const members = new TextDecoder().decode(o.stdout);
        if (members.includes(`, ${this.#name}, `)) return;
        throw new Error(`another etcd answers on ${this.url}: ${members.trim()}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`etcd did not start on ${this.url}`);
  }

  /** Kills etcd (data dir kept, so start() brings it back). */
  async kill(): Promise<void> {
    if (!this.#proc) return;
    try {
      this.#proc.kill("SIGKILL");
    } catch { /* gone */ }
    await this.#proc.status;
    await this.#stderr;
    this.#proc = null;
  }

  /** Runs etcdctl (API v3) against this etcd; returns stdout. */
  async ctl(...args: string[]): Promise<string> {
    const o = await new Deno.Command("/usr/bin/etcdctl", {
      args: [`--endpoints=${this.url}`, ...this.#ctlTlsArgs(), ...args],
      env: { ETCDCTL_API: "3" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const d = new TextDecoder();
    if (!o.success) throw new Error(`etcdctl ${args.join(" ")}: ${d.decode(o.stderr)}`);
    return d.decode(o.stdout);
  }

  /** Kills etcd, removes its data and ends the reservation of its ports. */
  async cleanup(): Promise<void> {
    await this.kill();
    if (this.#dataDir) await Deno.remove(this.#dataDir, { recursive: true }).catch(() => {});
    releasePort(this.#clientPort);
    releasePort(this.#peerPort);
  }
}

/** The argv that runs `script ARGS` with this Deno and the checkout's deno.json. */
function denoRunArgv(script: string, ...args: string[]): string[] {
  return [
    Deno.execPath(),
    "run",
    "-A",
    "--no-check",
    "--quiet",
    `--config=${ROOT}deno.json`,
    script,
    ...args,
  ];
}

/** The argv that runs `flanctl lease ARGS` from this checkout. */
function leaseArgv(args: string[]): string[] {
  return denoRunArgv(`${ROOT}main.ts`, "lease", ...args);
}

/** A Deno.Command running `flanctl lease ARGS` (stdout/stderr piped, stdin null). */
export function leaseCliCommand(args: string[]): Deno.Command {
  const [exe, ...rest] = leaseArgv(args);
  return new Deno.Command(exe, { args: rest, stdin: "null", stdout: "piped", stderr: "piped" });
}

/** Runs `flanctl lease ARGS` to completion. */
export function leaseCli(
  args: string[],
  opts: { stdin?: string; env?: Record<string, string> } = {},
): Promise<RunResult> {
  return run(leaseArgv(args), opts);
}
