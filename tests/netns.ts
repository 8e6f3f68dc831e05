/**
 * Throwaway network namespaces for tests. Every namespace gets a unique name (`<prefix><tag><random>`,
 * the prefix from FLANCTL_TEST_PREFIX, default `ft`, so several suites can share a host), is listed for
 * cleanup, and is deleted in `finally`, also when the test fails. Nothing here touches the root namespace.
 * @module
 */

import { runProcess as run } from "../lib/lab/proc.ts";

/** Result of a command. */
export type { CmdResult as RunResult } from "../lib/lab/proc.ts";
/** Runs a command; never throws on a non-zero exit (the lab's runner, which tests share). */
export { run };

/** Runs a command and returns stdout; throws with stderr on a non-zero exit. */
export async function sh(...cmd: string[]): Promise<string> {
  const r = await run(cmd);
  if (r.code !== 0) throw new Error(`${cmd.join(" ")} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** Runs `ip -j ARGS` inside `ns` and parses the JSON. */
export async function ipJson<T = unknown>(ns: string, ...args: string[]): Promise<T> {
  const out = await sh("ip", "-n", ns, "-j", ...args);
  return (out.trim() ? JSON.parse(out) : []) as T;
}

/**
 * The fallback tunnel devices the kernel makes in every new namespace while their module is loaded (and
 * net.core.fb_tunnels_only_for_init_net is 0), by name → link kind: no test made them.
 */
export const FALLBACK_TUNNELS: Readonly<Record<string, string>> = {
  tunl0: "ipip",
  sit0: "sit",
  ip6tnl0: "ip6tnl",
  gre0: "gre",
  gretap0: "gretap",
  erspan0: "erspan",
  ip6gre0: "ip6gre",
  ip_vti0: "vti",
  ip6_vti0: "vti6",
};

/** A link as `ip -d -j link` lists it (the fields read here). */
export interface LinkJson {
  ifname: string;
  linkinfo?: { info_kind?: string };
}

/** Whether `l` is one of the kernel's {@link FALLBACK_TUNNELS} (its name and its kind). */
export function isFallbackTunnel(l: LinkJson): boolean {
  return Object.hasOwn(FALLBACK_TUNNELS, l.ifname) && FALLBACK_TUNNELS[l.ifname] === l.linkinfo?.info_kind;
}

/** The names of the links of `ns`, in the kernel's order, without its fallback tunnel devices. */
export async function linkNames(ns: string): Promise<string[]> {
  return (await ipJson<LinkJson[]>(ns, "-d", "link", "show")).filter((l) => !isFallbackTunnel(l))
    .map((l) => l.ifname);
}

/** Runs a command inside netns `ns` (`ip netns exec`). */
export function nsRun(
  ns: string,
  cmd: string[],
  opts: { stdin?: string; env?: Record<string, string> } = {},
) {
  return run(["ip", "netns", "exec", ns, ...cmd], opts);
}

/** Runs a command inside `ns`; throws on failure. */
export function nsSh(ns: string, ...cmd: string[]): Promise<string> {
  return sh("ip", "netns", "exec", ns, ...cmd);
}

/**
 * The prefix of every namespace, lab and pod-namespace name the tests make: FLANCTL_TEST_PREFIX (1–6
 * lower-case letters or digits, starting with a letter; it must fit lab names of at most 12 characters and
 * link names of 15), default `ft`. Throws, naming the variable, when it is not such a string.
 */
export function testPrefix(value: string | undefined): string {
  if (value === undefined || value === "") return "ft";
  if (!/^[a-z][a-z0-9]{0,5}$/.test(value)) {
    throw new Error(
      `FLANCTL_TEST_PREFIX: '${value}' is not 1-6 lower-case letters or digits starting with a letter`,
    );
  }
  return value;
}

/** This run's name prefix (see {@link testPrefix}). */
export const TEST_PREFIX: string = testPrefix(Deno.env.get("FLANCTL_TEST_PREFIX"));

/**
 * The in-cluster variables of a CI that itself runs in a Kubernetes pod: every flanctl the suite starts
 * would inherit them and act as in a pod (doctor's unseenFromPod, lib/doctor/checks/cni.ts; the kube
 * store's in-cluster config). The suite runs flanctl as on a node: they are removed from this process's
 * environment when the harness loads, before any test starts a child. Only ever removed, never set back,
 * so the test files running beside (threads of this process) see nothing come and go; a test that wants
 * a pod passes them in its child's env.
 */
const POD_ENV = ["KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"] as const;
for (const k of POD_ENV) Deno.env.delete(k);

/** A unique name of at most 15 characters, usable for a netns or a link: the prefix, `tag`, random. */
export function uniqueName(tag: string): string {
  const rnd = crypto.getRandomValues(new Uint32Array(1))[0].toString(36).padStart(7, "0");
  return `${TEST_PREFIX}${tag}`.slice(0, 8) + rnd.slice(0, 7);
}

/** A set of namespaces a test made; `cleanup()` removes them (and kills what runs in them). */
export class NetnsFixture {
  readonly names: string[] = [];

  /** Creates a namespace with `lo` up and returns its name. */
  async add(tag = "n"): Promise<string> {
    const name = uniqueName(tag);
    await sh("ip", "netns", "add", name);
    this.names.push(name);
    await sh("ip", "-n", name, "link", "set", "lo", "up");
    return name;
  }

  /** Kills every process in the namespaces and deletes them. Never throws. */
  async cleanup(): Promise<void> {
    for (const n of this.names.reverse()) {
      const pids = await run(["ip", "netns", "pids", n]);
      for (const pid of pids.stdout.split(/\s+/).filter(Boolean)) {
        try {
          Deno.kill(Number(pid), "SIGKILL");
        } catch { /* gone */ }
      }
      await run(["ip", "netns", "del", n]);
    }
    this.names.length = 0;
  }
}

/** Runs `fn` with a fresh fixture and always cleans up. */
export async function withNetns<T>(fn: (fx: NetnsFixture) => Promise<T>): Promise<T> {
  const fx = new NetnsFixture();
  try {
    return await fn(fx);
  } finally {
    await fx.cleanup();
  }
}

/** Path to the repository root (for running `main.ts` in tests). */
export const ROOT = new URL("..", import.meta.url).pathname;

/** The command prefix that runs flanctl from this checkout with the current Deno. */
export function flanctlCmd(...args: string[]): string[] {
  return [Deno.execPath(), "run", "-A", "--no-check", "--quiet", `${ROOT}main.ts`, ...args];
}

/**
 * Starts the fixture program `tests/fixtures/<script>` with the current Deno inside netns `ns`, passing
 * `args`: stdin and stdout piped (the caller reads its report lines and ends it), stderr dropped.
 */
export function spawnFixture(ns: string, script: string, ...args: string[]): Deno.ChildProcess {
  const cmd = ["netns", "exec", ns, Deno.execPath(), "run", "-A", "--no-check", "--quiet"];
  return new Deno.Command("ip", {
    args: [...cmd, `${ROOT}tests/fixtures/${script}`, ...args],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
}

/** Runs flanctl from this checkout (optionally inside netns `ns`). */
export function flanctl(
  args: string[],
  opts: { ns?: string; stdin?: string; env?: Record<string, string> } = {},
) {
  const cmd = flanctlCmd(...args);
  return opts.ns ? nsRun(opts.ns, cmd, opts) : run(cmd, opts);
}
