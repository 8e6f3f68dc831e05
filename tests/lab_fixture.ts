/**
 * Shared set-up of the lab end-to-end tests: a lab with a unique name brought up by `flanctl lab up`, always
 * taken down by `flanctl lab down` (which must succeed), and checked to leave nothing behind.
 * @module
 */
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, flanctlCmd, run, type RunResult, TEST_PREFIX } from "./netns.ts";
import { loadState } from "../lib/lab/state.ts";
import { labRoot } from "../lib/lab/paths.ts";
import type { LabState } from "../lib/lab/types.ts";
import { labLeftovers } from "./lab_verify.ts";

/** A unique lab name (at most 12 characters): the test prefix and `tag` (6 at most), six random hex digits. */
export function labName(tag: string): string {
  return `${TEST_PREFIX}${tag}`.slice(0, 6) + crypto.randomUUID().replace(/-/g, "").slice(0, 6);
}

/** Runs `flanctl lab down --name NAME`. */
export function labDown(name: string): Promise<RunResult> {
  return run(flanctlCmd("lab", "down", "--name", name));
}

/** Runs `flanctl lab exec --name NAME TARGET -- CMD…` (TARGET: a node or pod). */
export function labExec(name: string, target: string, cmd: string[]): Promise<RunResult> {
  return flanctl(["lab", "exec", "--name", name, target, "--", ...cmd]);
}

/**
 * Brings up lab `tag…` with `lab up ARGS` (asserting exit 0 and, when `okCount` is given, the
 * `all N ok` check line), runs `fn` with its state and name, then always runs `lab down` (asserting
 * exit 0) and asserts the lab left nothing behind. Returns the lab's name.
 */
export async function withLab(
  tag: string,
  upArgs: string[],
  okCount: number | undefined,
  fn: (s: LabState, name: string) => Promise<void>,
): Promise<string> {
  const name = labName(tag);
  const dir = `${labRoot()}/${name}`;
  try {
    const up = await flanctl(["lab", "up", "--name", name, ...upArgs]);
    assertEquals(up.code, 0, `lab up failed:\n${up.stdout}\n${up.stderr}`);
    if (okCount !== undefined) assertStringIncludes(up.stdout, `all ${okCount} ok`);
    await fn(loadState(name), name);
  } finally {
    const d = await labDown(name);
    assertEquals(d.code, 0, d.stderr);
  }
  assertEquals(await labLeftovers(name, dir), []);
  return name;
}

/**
 * Runs `fn` with the path of a temporary net-conf.json holding `conf` (for `lab up --net-conf FILE`);
 * the file is removed afterwards, also when `fn` fails.
 */
export async function withNetConf<T>(
  conf: Record<string, unknown>,
  fn: (file: string) => Promise<T>,
): Promise<T> {
  const file = await Deno.makeTempFile({ suffix: ".json" });
  try {
    await Deno.writeTextFile(file, JSON.stringify(conf));
    return await fn(file);
  } finally {
    await Deno.remove(file);
  }
}

/** A dual-stack vxlan network in nftables mode (EnableNFTables), as `lab up --net-conf` takes it. */
export const DUAL_NFT_NETCONF = {
  Network: "10.246.0.0/16",
  EnableIPv6: true,
  IPv6Network: "fc00:246::/48",
  Backend: { Type: "vxlan" },
  EnableNFTables: true,
};

/**
 * Kills the lab process `what` ("daemon node2", "etcd") with SIGKILL and waits until it is gone or a
 * zombie (killed, not yet reaped by its parent). Returns its pid; throws when it is still alive after 30 s
 * (the caller's assertions about a dead process would fail confusingly otherwise).
 */
export async function killLabProc(s: LabState, what: string): Promise<number> {
  const p = s.procs.find((p) => p.what === what);
  if (!p) throw new Error(`no lab process "${what}" in ${s.procs.map((p) => p.what).join(", ")}`);
  const pid = p.pid;
  Deno.kill(pid, "SIGKILL");
  const end = Date.now() + 30_000;
  for (;;) {
    const st = await Deno.readTextFile(`/proc/${pid}/stat`).catch(() => "");
    if (!st || st.slice(st.lastIndexOf(")") + 2).startsWith("Z")) return pid;
    if (Date.now() > end) throw new Error(`${what} (pid ${pid}) still alive 30 s after SIGKILL`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
