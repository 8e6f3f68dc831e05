import { assert, assertEquals, assertRejects, assertStringIncludes } from "../../../tests/assert.ts";
import { IPNet } from "../../base/cidr.ts";
import { Logger } from "../../base/log.ts";
import type { Lease } from "../../lease/types.ts";
import { ExtensionBackend, ExtensionCommandError, MAX_OUTPUT_BYTES } from "./backend.ts";
import type { ExtensionOptions } from "./options.ts";

const EXT = { name: "eth0", index: 2, mtu: 1480, ifaceIP: "192.0.2.1", publicIP: "198.51.100.1" };

function make(commands: ExtensionOptions, lines: string[] = [], timeoutMs = 10_000) {
  return new ExtensionBackend({
    commands,
    ext: EXT,
    network: { v4: IPNet.parse("10.244.0.0/16"), enableIPv4: true, enableIPv6: false },
    log: new Logger({ sink: (l) => lines.push(l), time: false }),
    timeoutMs,
    environ: () => ({ PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", OUT: "/dev/null" }),
  });
}

function lease(n: number, data?: unknown, type = "extension"): Lease {
  return {
    subnet: IPNet.parse(`10.244.${n}.0/24`),
    ipv6Subnet: null,
    attrs: {
      PublicIP: `192.0.2.${n}`,
      PublicIPv6: null,
      BackendType: type,
      ...(data === undefined ? {} : { BackendData: data }),
    },
    expiration: null,
  };
}

/** Writes an executable shell script `name` in `dir` (commands run without a shell, so hooks are files). */
async function script(dir: string, name: string, body: string): Promise<string> {
  const path = `${dir}/${name}`;
  await Deno.writeTextFile(path, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return path;
}

/** A hook appending "<$1>|SUBNET|PUBLIC_IP|<$2>|stdin" as one line to the file named by $3. */
const REC = `printf '%s|%s|%s|%s|%s\\n' "$1" "$SUBNET" "$PUBLIC_IP" "$2" "$(cat)" >>"$3"`;

Deno.test("extension: PreStartupCommand's trimmed output is the BackendData; none configured: no data", async () => {
  const be = make({ PreStartupCommand: "echo   hello   world  " });
  await be.prepare();
  assertEquals(be.backendData(), "hello world");
  const none = make({});
  await none.prepare();
  assertEquals(none.backendData(), null);
  // The lease attributes: BackendType extension (the daemon's default), PublicIP the interface's address.
  assertEquals(
    be.leaseAttrs({ PublicIP: "198.51.100.1", PublicIPv6: null, BackendType: "extension", BackendData: "x" }),
    { PublicIP: "192.0.2.1", PublicIPv6: null, BackendType: "extension", BackendData: "x" },
  );
  assertEquals([be.mtu, be.overlayDev, be.peer()], [1480, null, null]);
});

Deno.test("extension: a failing start-up command stops the start with flanneld's words", async () => {
  const lines: string[] = [];
  const dir = await Deno.makeTempDir();
  const fail = await script(dir, "fail", "echo nope; exit 4");
  const be = make({ PreStartupCommand: `${fail} x` }, lines);
  const e = await assertRejects(() => be.prepare(), ExtensionCommandError);
  await Deno.remove(dir, { recursive: true });
  assertEquals(
    e.message,
    `PreStartupCommand: failed to run command: ${fail} x Err: exit status 4 Output: nope`,
  );
  assert(
    lines.some((l) => l.includes('msg="failed to run command"') && l.includes("exit status 4")),
    lines.join("\n"),
  );
  const post = make({ PostStartupCommand: "flanctl-no-such-command" });
  await assertRejects(
    () => post.leased(lease(1)),
    ExtensionCommandError,
    'Err: exec: "flanctl-no-such-command": executable file not found in $PATH',
  );
  const big = make({ PreStartupCommand: `head -c ${MAX_OUTPUT_BYTES + 1} /dev/zero` });
  await assertRejects(() => big.prepare(), ExtensionCommandError, "longer than");
});

Deno.test("extension: PostStartupCommand gets flanneld's five variables (absent family: Go's zero values)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const hook = await script(dir, "hook", `env >"$1"`);
    const be = make({ PostStartupCommand: `${hook} ${dir}/env` });
    await be.leased(lease(3));
    const env = Object.fromEntries(
      (await Deno.readTextFile(`${dir}/env`)).trim().split("\n").map((l) => l.split("=", 2)),
    );
    assertEquals(
      [env.NETWORK, env.SUBNET, env.IPV6SUBNET, env.PUBLIC_IP, env.PUBLIC_IPV6, env.OUT],
      ["10.244.0.0/16", "10.244.3.0/24", "::/0", "192.0.2.3", "<nil>", "/dev/null"],
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("extension: add/remove commands per lease event, in order, with SUBNET, PUBLIC_IP and stdin", async () => {
  const dir = await Deno.makeTempDir(), lines: string[] = [];
  try {
    const f = `${dir}/events`, rec = await script(dir, "rec", REC);
    // $SUBNET in the command line is expanded by the daemon (as flanneld), before the hook runs.
    const be = make({
      SubnetAddCommand: `${rec} add \${SUBNET} ${f}`,
      SubnetRemoveCommand: `${rec} del $OUT ${f}`,
    }, lines);
    // The start-up listing: an add for each; a foreign BackendType is ignored; non-string data skipped.
    be.leasesListed([lease(1, "one"), lease(2), lease(4, null, "vxlan"), lease(5, { VtepMAC: "x" })]);
    await be.idle();
    // A relist with 2 gone and 6 new: remove 2, add 6 (1 stays: nothing).
    be.leasesListed([lease(1, "one"), lease(6, "six")]);
    // Watched events: a rewrite of 1 runs add again; a removal carries the last known data.
    be.leaseEvent({ type: "added", lease: lease(1, "one again") });
    be.leaseEvent({
      type: "removed",
      lease: { ...lease(6), attrs: { PublicIP: "0.0.0.0", BackendType: "" } },
    });
    await be.idle();
    assertEquals((await Deno.readTextFile(f)).trim().split("\n"), [
      "add|10.244.1.0/24|192.0.2.1|10.244.1.0/24|one",
      "add|10.244.2.0/24|192.0.2.2|10.244.2.0/24|",
      "add|10.244.6.0/24|192.0.2.6|10.244.6.0/24|six",
      "del|10.244.2.0/24|192.0.2.2|/dev/null|",
      "add|10.244.1.0/24|192.0.2.1|10.244.1.0/24|one again",
      "del|10.244.6.0/24|192.0.2.6|/dev/null|six",
    ]);
    const log = lines.join("\n");
    assertStringIncludes(log, 'msg="ignoring non-extension subnet" subnet=10.244.4.0/24 type=vxlan');
    assertStringIncludes(
      log,
      'msg="failed to unmarshal BackendData: not a JSON string" subnet=10.244.5.0/24',
    );
    assertEquals([be.stats.SubnetAddCommand.ok, be.stats.SubnetRemoveCommand.ok], [4, 2]);
    assertEquals(be.stats.SubnetAddCommand.skipped, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("extension: a failing or hanging event command is logged, counted, and the next one runs", async () => {
  const dir = await Deno.makeTempDir(), lines: string[] = [];
  try {
    const f = `${dir}/events`;
    const hook = await script(
      dir,
      "hook",
      `case "$SUBNET" in 10.244.1.0/24) exit 7;; 10.244.2.0/24) exec sleep 30;; *) echo "$SUBNET" >>"$1";; esac`,
    );
    const be = make({ SubnetAddCommand: `${hook} ${f}` }, lines, 300);
    be.leasesListed([lease(1), lease(2), lease(3)]);
    await be.idle();
    assertEquals(await Deno.readTextFile(f), "10.244.3.0/24\n");
    const s = be.stats.SubnetAddCommand;
    assertEquals([s.ok, s.failed, s.timedOut], [1, 1, 1]);
    const log = lines.join("\n");
    assertStringIncludes(log, 'error="exit status 7"');
    assertStringIncludes(log, 'error="timed out after 300 ms: signal: killed"');
    const m = be.metricLines().join("\n");
    assertStringIncludes(
      m,
      'flanctl_extension_commands_total{command="SubnetAddCommand",result="timeout"} 1',
    );
    assertStringIncludes(
      m,
      'flanctl_extension_command_last_run_timestamp_seconds{command="SubnetAddCommand",result="ok"}',
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("extension: output is logged escaped and bounded, never raw", async () => {
  const lines: string[] = [], dir = await Deno.makeTempDir();
  const hook = await script(dir, "hook", `printf 'a\\033[2Jb\\n%02000d' 0`);
  const be = make({ PostStartupCommand: hook }, lines);
  await be.leased(lease(1));
  await Deno.remove(dir, { recursive: true });
  const line = lines.find((l) => l.includes('msg="ran command"'))!;
  assert(!line.includes("\x1b"), line);
  assertStringIncludes(line, "a\\\\x1b[2Jb");
  assert(line.length < 1400, `${line.length}`);
});

Deno.test("extension: close kills the running command and drops the queue", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const hook = await script(dir, "hook", `sleep 30; touch "$1"`);
    const be = make({ SubnetAddCommand: `${hook} ${dir}/x` });
    be.leasesListed([lease(1), lease(2)]);
    const t0 = Date.now();
    await new Promise((r) => setTimeout(r, 100));
    await be.close();
    assert(Date.now() - t0 < 5_000);
    be.leaseEvent({ type: "added", lease: lease(3) });
    await be.idle();
    assertEquals(await Deno.stat(`${dir}/x`).then(() => true, () => false), false);
    assertEquals(be.stats.SubnetAddCommand.ok, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
