/**
 * The extension backend's test hooks, shared by tests/daemon_alloc_ext_test.ts and
 * tests/peers_flanneld_ext_test.ts: a net-conf whose commands are shell scripts (the commands run without a
 * shell, so a hook is a file) recording what each command saw into the node's directory.
 * @module
 */
import type { TestNode } from "./daemon_fixture.ts";

/** Writes an executable shell script (the commands run without a shell: hooks are files). */
export async function hook(path: string, body: string): Promise<string> {
  await Deno.writeTextFile(path, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return path;
}

/** The hooks of an extension net-conf: events appended to $OUT_DIR/events, the post-start env to $OUT_DIR/env. */
export async function extensionConf(dir: string, network: string): Promise<Record<string, unknown>> {
  const rec = await hook(
    `${dir}/rec`,
    `printf '%s|%s|%s|%s\\n' "$1" "$SUBNET" "$PUBLIC_IP" "$(cat)" >>"$2/events"`,
  );
  const pre = await hook(`${dir}/pre`, `echo "  data of $1  "`);
  const post = await hook(`${dir}/post`, `env | sort >"$1/env"`);
  return {
    Network: network,
    Backend: {
      Type: "extension",
      PreStartupCommand: `${pre} $EXT_NODE`,
      PostStartupCommand: `${post} \${OUT_DIR}`,
      SubnetAddCommand: `${rec} add $OUT_DIR`,
      SubnetRemoveCommand: `${rec} del $OUT_DIR`,
    },
  };
}

/** The lines of `n`'s events file (empty when none yet). */
export async function events(n: TestNode): Promise<string[]> {
  const t = await Deno.readTextFile(`${n.dir}/events`).catch(() => "");
  return t.split("\n").filter((l) => l !== "");
}

/** The variables `n`'s PostStartupCommand saw. */
export async function postEnv(n: TestNode): Promise<Record<string, string>> {
  const t = await Deno.readTextFile(`${n.dir}/env`);
  return Object.fromEntries(
    t.trim().split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
}
