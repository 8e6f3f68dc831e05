/**
 * Helpers for the store tests: many acquiring processes, waiting for watch events with a deadline, and a
 * throwaway etcd server on free loopback ports.
 * @module
 */
import type { LeaseEvent } from "../lib/store/types.ts";
import type { StoreOptions } from "../lib/store/open.ts";

const ROOT = new URL("..", import.meta.url).pathname;

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
    const procs = Array.from({ length: n }, (_, i) =>
      new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--no-check",
          "--quiet",
          `--config=${ROOT}deno.json`,
          script,
          JSON.stringify(opts),
          `10.250.${Math.floor(i / 250)}.${(i % 250) + 1}`,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output());
    const outs = await Promise.all(procs);
    return outs.map((o) => {
      const text = new TextDecoder().decode(o.stdout).trim();
      try {
        return JSON.parse(text.split("\n").pop()!) as AcquireResult;
      } catch {
        return { error: `exit ${o.code}: ${text} ${new TextDecoder().decode(o.stderr)}` };
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
  timeoutMs = 10_000,
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

/** A free TCP port on 127.0.0.1. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const p = (l.addr as Deno.NetAddr).port;
  l.close();
  return p;
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
  readonly #tls: EtcdTls | undefined;
  #dataDir = "";
  #proc: Deno.ChildProcess | null = null;

  constructor(tls?: EtcdTls) {
    this.#clientPort = freePort();
    this.#peerPort = freePort();
    this.#tls = tls;
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

  /** Starts etcd (again, on the same data dir) and waits until it answers. */
  async start(): Promise<void> {
    if (!this.#dataDir) this.#dataDir = await Deno.makeTempDir({ prefix: "flanctl-etcd-" });
    const peer = `http://127.0.0.1:${this.#peerPort}`;
    this.#proc = new Deno.Command("/usr/bin/etcd", {
      args: [
        "--name=t",
        `--data-dir=${this.#dataDir}`,
        `--listen-client-urls=${this.url}`,
        `--advertise-client-urls=${this.url}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=t=${peer}`,
        "--log-level=error",
        ...this.#tlsArgs(),
      ],
      stdout: "null",
      stderr: "null",
    }).spawn();
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      const o = await new Deno.Command("/usr/bin/etcdctl", {
        args: [`--endpoints=${this.url}`, ...this.#ctlTlsArgs(), "endpoint", "health"],
        env: { ETCDCTL_API: "3" },
        stdout: "null",
        stderr: "null",
      }).output();
      if (o.success) return;
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

  /** Kills etcd and removes its data. */
  async cleanup(): Promise<void> {
    await this.kill();
    if (this.#dataDir) await Deno.remove(this.#dataDir, { recursive: true }).catch(() => {});
  }
}

let harness: string | null = null;

/**
 * The entry point that runs `flanctl`: main.ts when the whole command tree is present, else (while other
 * cli/ modules are still being written) a harness that registers only cli/lease.ts with the same
 * error-to-exit-code rules.
 */
async function cliEntry(): Promise<string> {
  const rootSrc = await Deno.readTextFile(`${ROOT}cli/root.ts`);
  const missing = [...rootSrc.matchAll(/from "\.\/([a-z_]+\.ts)"/g)].some((m) => {
    try {
      Deno.statSync(`${ROOT}cli/${m[1]}`);
      return false;
    } catch {
      return true;
    }
  });
  if (!missing) return `${ROOT}main.ts`;
  if (harness) return harness;
  const tmp = await Deno.makeTempDir({ prefix: "flanctl-cli-" });
  globalThis.addEventListener("unload", () => Deno.removeSync(tmp, { recursive: true }));
  harness = `${tmp}/lease_cli.ts`;
  await Deno.writeTextFile(
    harness,
    `import { Command } from "commander";
import { register } from "${ROOT}cli/lease.ts";
import { FlanctlError } from "${ROOT}lib/errors.ts";
const p = new Command("flanctl").exitOverride();
register(p);
for (const c of p.commands) c.exitOverride();
try {
  await p.parseAsync(Deno.args, { from: "user" });
  Deno.exit(0);
} catch (e) {
  if (e instanceof FlanctlError) { console.error("flanctl: " + e.message); Deno.exit(e.exitCode); }
  if ((e as { code?: string }).code?.startsWith("commander.")) Deno.exit((e as { exitCode: number }).exitCode === 0 ? 0 : 2);
  console.error(e); Deno.exit(1);
}
`,
  );
  return harness;
}

/** A Deno.Command running `flanctl lease ARGS` (stdout/stderr piped). */
export async function leaseCliCommand(
  args: string[],
  opts: { stdin?: boolean; env?: Record<string, string> } = {},
): Promise<Deno.Command> {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--no-check",
      "--quiet",
      `--config=${ROOT}deno.json`,
      await cliEntry(),
      "lease",
      ...args,
    ],
    stdin: opts.stdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
    env: opts.env,
  });
}

/** Runs `flanctl lease ARGS` to completion. */
export async function leaseCli(
  args: string[],
  opts: { stdin?: string; env?: Record<string, string> } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const p = (await leaseCliCommand(args, { stdin: opts.stdin !== undefined, env: opts.env })).spawn();
  if (opts.stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(opts.stdin));
    await w.close();
  }
  const o = await p.output();
  const d = new TextDecoder();
  return { code: o.code, stdout: d.decode(o.stdout), stderr: d.decode(o.stderr) };
}
