/** Help text: the store flags listed once (in `flanctl lease --help`), and no source paths anywhere. */
import { assert, assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { flanctl } from "../tests/netns.ts";
import { STORE_FLAGS as STORE_FLAG_SPECS } from "../lib/store/flags.ts";
import { flagEnv } from "../lib/base/goflag.ts";

const STORE_FLAGS = [
  "--store-dir",
  "--etcd-endpoints",
  "--etcd-prefix",
  "--kube-subnet-mgr",
  "--net-config-path",
];
const COMMANDS = [
  [],
  ["lease"],
  ["lease", "list"],
  ["lease", "show"],
  ["lease", "watch"],
  ["lease", "config", "set"],
  ["inspect"],
  ["doctor"],
  ["cni"],
  ["lab"],
  ["lab", "up"],
  ["lab", "status"],
  ["lab", "list"],
  ["lab", "logs"],
  ["lab", "exec"],
  ["completion"],
  ["daemon"],
  ["status"],
  ["trace"],
  ["install-cni"],
];

async function help(args: string[]): Promise<string> {
  const r = await flanctl([...args, "--help"]);
  assertEquals(r.code, 0, `${args.join(" ")} --help: ${r.stderr}`);
  return r.stdout;
}

Deno.test("help: store flags listed once in 'flanctl lease --help', pointed to elsewhere, still accepted", async () => {
  const lease = await help(["lease"]);
  for (const f of STORE_FLAGS) {
    assertEquals(lease.split(f + " ").length - 1, 1, `${f} once in lease --help`);
  }
  // Every listed flag that has an env variable names it (booleans too: --kube-subnet-mgr).
  const flat = lease.replace(/\s+/g, " ");
  for (const spec of STORE_FLAG_SPECS.filter((s) => !s.hidden)) {
    const env = flagEnv(spec);
    if (env) assertStringIncludes(flat, env, `--${spec.name}: its env variable in lease --help`);
  }
  for (const args of [["lease", "list"], ["lease", "revoke"], ["lease", "config", "get"], ["doctor"]]) {
    const h = await help(args);
    for (const f of STORE_FLAGS) assert(!h.includes(f + " "), `${args.join(" ")} --help repeats ${f}`);
    assertStringIncludes(h, "see 'flanctl lease --help'");
  }
  const dir = await Deno.makeTempDir({ prefix: "flanctl-help-" });
  try {
    const r = await flanctl(["lease", "list", "--etcd-prefix", "/x", "--store-dir", dir, "-o", "json"]);
    assertEquals([r.code, r.stdout.trim()], [0, "[]"], r.stderr);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("help: speaks of the product, never of source paths", async () => {
  for (const args of COMMANDS) {
    const h = await help(args);
    assert(
      !/(^|[\s'"(`])(lib|cli|tests)\/|\.ts\b/.test(h),
      `${args.join(" ")} --help names a source path:\n${h}`,
    );
  }
});
