/**
 * For benches that run in a network namespace of their own: the outer process makes a throwaway netns
 * (lo up), re-runs the bench inside it with `envVar` set to its name, always kills what is left in it and
 * deletes it, then exits with the inner run's code. Nothing touches the root namespace.
 * @module
 */
import { runProcess } from "../lib/lab/proc.ts";

/**
 * Inside the bench netns (`envVar` set): returns at once. Outside: runs `benchUrl` again inside a new netns
 * named `prefix` + a random suffix and exits with its code (never returns).
 */
export async function runInOwnNetns(envVar: string, prefix: string, benchUrl: string): Promise<void> {
  if (Deno.env.get(envVar) !== undefined) return;
  const node = `${prefix}${crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 6)}`;
  await runProcess(["ip", "netns", "add", node]);
  let code = 1;
  try {
    await runProcess(["ip", "-n", node, "link", "set", "lo", "up"]);
    const p = new Deno.Command("ip", {
      args: [
        "netns",
        "exec",
        node,
        "env",
        `${envVar}=${node}`,
        Deno.execPath(),
        "run",
        "-A",
        "--no-check",
        new URL(benchUrl).pathname,
        ...Deno.args,
      ],
      stdout: "inherit",
      stderr: "inherit",
    }).spawn();
    code = (await p.status).code;
  } finally {
    const pids = await runProcess(["ip", "netns", "pids", node]);
    for (const pid of pids.stdout.split(/\s+/).filter(Boolean)) {
      try {
        Deno.kill(Number(pid), "SIGKILL");
      } catch { /* gone */ }
    }
    await runProcess(["ip", "netns", "del", node]);
  }
  Deno.exit(code);
}

/** The number after `--NAME` on the command line, or `def`. */
export function arg(name: string, def: number): number {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Number(Deno.args[i + 1]) : def;
}
