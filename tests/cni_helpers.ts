/**
 * Helpers for the CNI tests: run one of our plugins (through main.ts in symlink mode, as a runtime would
 * run /opt/cni/bin/<plugin>) or a reference Go plugin ({@link REF_DIR}), inside a "node" netns, with the
 * CNI environment and the config on stdin.
 * @module
 */
import { ROOT, run, type RunResult, withNetns } from "./netns.ts";
import { type RefCniDir, refCniDir } from "./peers.ts";

/**
 * How our plugins are started: main.ts in symlink mode, without deno.json/lockfile (the CNI path imports
 * no bare specifiers; skipping the config saves ~30 ms per call, which the 200-pod test multiplies).
 */
export function pluginCmd(): string[] {
  return [
    Deno.execPath(),
    "run",
    "-A",
    "--no-check",
    "--quiet",
    "--no-config",
    "--no-lock",
    `${ROOT}main.ts`,
  ];
}

/**
 * The reference plugins the side-by-side tests compare with (tests/peers.ts refCniDir): the pinned release
 * (v1.10.0) built by `tools/peers/build.sh cni-plugins` (install.sh --dev) into the dev cache, else Debian's
 * containernetworking-plugins in /usr/lib/cni (1.1.1 here); FLANCTL_REF_CNI_DIR overrides.
 */
export const REF: RefCniDir = refCniDir();

/** The directory of the reference plugins ({@link REF}). */
export const REF_DIR = REF.dir;

/** The reference plugins among `names` that are not installed in `dir` ({@link REF_DIR}). */
export function missingRefPlugins(names: string[], dir = REF_DIR): string[] {
  return names.filter((n) => {
    try {
      return !Deno.statSync(`${dir}/${n}`).isFile;
    } catch {
      return true;
    }
  });
}

/**
 * Whether the reference plugins speak spec 1.1.0 (v1.5+, e.g. the v1.10.0 build): then every kernel detail
 * is compared with them. Debian's 1.1.1 stops at 1.0.0 and predates what v1.10 changed (veth txqueuelen
 * 1000, arp_notify, keep_addr_on_down, host-local file modes, GC): with it, tests assert the measured v1.10
 * values for those instead (docs/cni.md).
 */
export async function refSpeaks11(plugin = "bridge"): Promise<boolean> {
  const o = await new Deno.Command(`${REF_DIR}/${plugin}`, {
    env: { CNI_COMMAND: "VERSION" },
    stdout: "piped",
  })
    .output().catch(() => null);
  return !!o && o.success && new TextDecoder().decode(o.stdout).includes('"1.1.0"');
}

/**
 * A pod-side veth's txqueuelen for comparing with the reference: the kernel's default (1000) with v1.10 as
 * with ours; Debian's 1.1.1 sets 0, so against it the value is left out. (The host end is 0 with both.)
 */
export function vethTxqlen(l: Record<string, unknown>, refNew: boolean): unknown {
  return refNew ? (l.txqlen ?? 0) : "not compared (Debian's reference predates v1.10)";
}

let told = false;

/**
 * Whether the side-by-side tests of this module can run: true when every reference plugin in `names` is
 * in {@link REF_DIR}. When some are missing, the tests that need them are to be ignored (the caller passes
 * `ignore: !requireRefPlugins(...)`), and: under CI (`CI=true`) a test named after the missing plugins is
 * registered that fails, so the suite cannot pass without them; elsewhere a warning says what is skipped.
 * Under CI the reference must also be the pinned build (not Debian's fallback): a failing test says so.
 * Elsewhere the fallback is said once per process.
 */
export function requireRefPlugins(names: string[], env = Deno.env.get("CI"), ref = REF): boolean {
  const missing = missingRefPlugins(names, ref.dir);
  if (missing.length) {
    const what = `reference CNI plugins missing in ${ref.dir}: ${missing.join(", ")} ` +
      `(reference: ${ref.label}; ./install.sh --dev builds them)`;
    if (env === "true") {
      Deno.test(`side-by-side tests need the reference plugins (${missing.join(", ")})`, () => {
        throw new Error(`${what}; under CI the side-by-side tests may not be skipped`);
      });
    } else {
      console.error(`warning: ${what}; skipping the tests that compare with them`);
    }
    return false;
  }
  if (ref.source === "debian") {
    if (env === "true") {
      Deno.test("side-by-side tests need the pinned reference plugins build", () => {
        throw new Error(`comparing with ${ref.label}; under CI the pinned build must be there`);
      });
      return false;
    }
    if (!told) {
      told = true;
      console.error(
        `note: comparing with ${ref.label}; what v1.10 changed is asserted against measured values`,
      );
    }
  }
  return true;
}

/** One plugin invocation. */
export interface CniCall {
  plugin: string;
  command: string;
  /** Node netns to run in (`ip netns exec`); omitted = where the test runs (only for pure file plugins). */
  node?: string;
  containerId?: string;
  /** Pod netns name (becomes /var/run/netns/NAME) or a path starting with '/'. */
  netns?: string;
  ifname?: string;
  args?: string;
  path?: string;
  conf: unknown;
  /** Run the reference Go plugin instead of ours. */
  ref?: boolean;
  /** Extra/override env (a value of null removes the variable). */
  env?: Record<string, string | null>;
  /** Run this executable (e.g. a launcher script) instead of ours through main.ts. */
  exe?: string;
}

/** Result of a call: exit code, raw output and stdout parsed as JSON (null when empty/invalid). */
export interface CniOut extends RunResult {
  json: Record<string, unknown> | null;
}

/** Builds the CNI environment for a call. */
export function cniEnv(c: CniCall): Record<string, string> {
  const env: Record<string, string | null> = {
    CNI_COMMAND: c.command,
    CNI_CONTAINERID: c.containerId ?? "",
    CNI_NETNS: c.netns === undefined ? "" : c.netns.startsWith("/") ? c.netns : `/var/run/netns/${c.netns}`,
    CNI_IFNAME: c.ifname ?? "eth0",
    CNI_ARGS: c.args ?? "",
    CNI_PATH: c.path ?? REF_DIR,
    ...c.env,
  };
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== null) out[k] = v;
  return out;
}

/** Runs a plugin and parses its stdout. */
export async function cni(c: CniCall): Promise<CniOut> {
  const env = cniEnv(c);
  const stdin = typeof c.conf === "string" ? c.conf : JSON.stringify(c.conf);
  const base = c.ref ? [`${REF_DIR}/${c.plugin}`] : c.exe ? [c.exe] : pluginCmd();
  // `env -i` so only the CNI variables (plus PATH) reach the plugin, as with a runtime.
  const envArgs = ["env", "-i", `PATH=${Deno.env.get("PATH") ?? "/usr/bin:/bin"}`];
  if (!c.ref) envArgs.push(`FLANCTL_ARGV0=${c.plugin}`);
  for (const [k, v] of Object.entries(env)) envArgs.push(`${k}=${v}`);
  // Ours enter the node netns with nsenter (setns only; `ip netns exec` also remounts /sys, which our
  // plugins never read); the reference plugins get the full `ip netns exec` treatment.
  const enter = c.ref ? ["ip", "netns", "exec", c.node ?? ""] : ["nsenter", `--net=/var/run/netns/${c.node}`];
  const cmd = c.node ? [...enter, ...envArgs, ...base] : [...envArgs, ...base];
  const r = await run(cmd, { stdin });
  let json: Record<string, unknown> | null = null;
  try {
    json = r.stdout.trim() ? JSON.parse(r.stdout) : null;
  } catch { /* not JSON */ }
  if (c.ref && json) await oldRefResult(json);
  return { ...r, json };
}

let refNew: Promise<boolean> | undefined;

/**
 * Debian's 1.1.1 (libcni 1.1) prints `"dns":{}` in a 1.x result; v1.10 (libcni 1.2+) leaves an empty dns
 * out, as ours does (lib/cni/result.ts): against the old reference that one key is dropped from its result,
 * so the comparison is about the content. Against v1.10 nothing is changed.
 */
async function oldRefResult(json: Record<string, unknown>): Promise<void> {
  if (!String(json.cniVersion ?? "").startsWith("1.")) return;
  const dns = json.dns;
  if (!dns || typeof dns !== "object" || Object.keys(dns).length) return;
  if (await (refNew ??= refSpeaks11())) return;
  delete json.dns;
}

/** Like {@link cni} but throws unless the call succeeded. */
export async function cniOk(c: CniCall): Promise<Record<string, unknown> | null> {
  const r = await cni(c);
  if (r.code !== 0) {
    throw new Error(
      `${c.ref ? "reference " : ""}${c.plugin} ${c.command} exited ${r.code}: ${r.stdout} ${r.stderr}`,
    );
  }
  return r.json;
}

/** A temp dir removed by the returned cleanup function. */
export function tempDir(): { path: string; cleanup: () => void } {
  const path = Deno.makeTempDirSync({ prefix: "flanctl-cni-" });
  return { path, cleanup: () => Deno.removeSync(path, { recursive: true }) };
}

/** Lists files under `dir` recursively (relative paths), [] when it does not exist. */
export function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    let entries: Deno.DirEntry[];
    try {
      entries = [...Deno.readDirSync(d)];
    } catch {
      return;
    }
    for (const e of entries) {
      if (e.isDirectory) walk(`${d}/${e.name}`, `${rel}${e.name}/`);
      else out.push(`${rel}${e.name}`);
    }
  };
  walk(dir, "");
  return out.sort();
}

/** Runs async tasks with at most `limit` in flight; results in input order. */
export async function pool<T, R>(
  items: T[],
  limit: number,
  fn: (t: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * Polls `fn` until it returns true or `ms` pass (kernel netns teardown is asynchronous, and slow while the
 * whole suite deletes namespaces on a loaded machine).
 */
export async function waitFor(fn: () => Promise<boolean>, ms = 30_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return await fn();
}

/** One side of a side-by-side test: a node netns, a pod netns and a data directory. */
export interface Side {
  node: string;
  pod: string;
  dir: string;
}

/**
 * Runs `fn` with two fresh sides (`a` for ours, `b` for the reference), namespaces tagged `<tag>a`/`<tag>b`
 * (node) and `<tag>p`/`<tag>q` (pod); the namespaces and data directories are removed afterwards.
 */
export function sideBySide(tag: string, fn: (a: Side, b: Side) => Promise<void>): Promise<void> {
  return withNetns(async (fx) => {
    const nodeA = await fx.add(`${tag}a`), podA = await fx.add(`${tag}p`);
    const nodeB = await fx.add(`${tag}b`), podB = await fx.add(`${tag}q`);
    const dA = tempDir(), dB = tempDir();
    try {
      await fn({ node: nodeA, pod: podA, dir: dA.path }, { node: nodeB, pod: podB, dir: dB.path });
    } finally {
      dA.cleanup();
      dB.cleanup();
    }
  });
}
