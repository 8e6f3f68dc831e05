/** cli/daemon_main.ts, the daemon's entry point, loads no commander (the flags' effects, as root: tests/daemon_flanneld_args_test.ts). */
import { assert, assertEquals } from "../tests/assert.ts";
import { ROOT } from "../tests/netns.ts";

Deno.test("daemon path: commander is not in the code graph of cli/daemon_main.ts", async () => {
  const o = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", `${ROOT}cli/daemon_main.ts`],
    stdout: "piped",
  }).output();
  const g = JSON.parse(new TextDecoder().decode(o.stdout)) as {
    roots: string[];
    modules: { specifier: string; dependencies?: { specifier: string; code?: { specifier: string } }[] }[];
    redirects?: Record<string, string>;
  };
  const bySpec = new Map(g.modules.map((m) => [m.specifier, m]));
  // Walk only runtime ("code") edges, static and dynamic; type-only imports load nothing.
  const seen = new Set<string>();
  const todo = [...g.roots];
  while (todo.length) {
    const s = todo.pop()!;
    const spec = g.redirects?.[s] ?? s;
    if (seen.has(spec)) continue;
    seen.add(spec);
    for (const d of bySpec.get(spec)?.dependencies ?? []) if (d.code) todo.push(d.code.specifier);
  }
  assert(seen.size > 20, `graph walked (${seen.size} modules)`);
  assert(seen.has(`file://${ROOT}lib/daemon/run.ts`), "the daemon itself is in the graph");
  const cmd = [...seen].filter((s) => s.includes("commander"));
  assertEquals(cmd, [], "commander on the daemon path");
});
