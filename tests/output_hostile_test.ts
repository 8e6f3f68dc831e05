/**
 * Output is safe with hostile values (issue 30): link names like `v$(>pwn1)` reach doctor's fix lines
 * quoted, so pasting every fix line into a shell runs no code from a name (no file appears); ESC bytes in
 * link names reach no table (doctor, inspect) as raw bytes; and piping doctor, status, inspect or lease into
 * a reader that is already gone (`| true`, what `| head` does after its lines) ends quietly — no stack
 * trace — with the exit code the command has unpiped.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { doctorArgs, withDoctorNode } from "./doctor_fixture.ts";
import { flanctl, flanctlCmd, run, sh } from "./netns.ts";
import { shq } from "../lib/lab/proc.ts";
import type { FindingId } from "../lib/doctor/mod.ts";

const HOSTILE = ["v$(>pwn1)", "veth$(>pwn2)"];
const ESC = ["e\x1b[2Jz", "veth\x1b]0;T"];

needsRoot.test("output: fix lines quote hostile link names; tables escape control bytes", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    await sh("ip", "-n", N, "link", "add", HOSTILE[0], "type", "veth", "peer", "name", HOSTILE[1]);
    await sh("ip", "-n", N, "link", "set", HOSTILE[0], "master", "cni0");
    for (const l of HOSTILE) await sh("ip", "-n", N, "link", "set", l, "up");
    await sh("ip", "-n", N, "route", "add", "10.244.77.0/24", "dev", HOSTILE[1]);
    await sh("ip", "-n", N, "link", "add", ESC[0], "type", "veth", "peer", "name", ESC[1]);

    const r = await flanctl(doctorArgs(n, "-o", "json"));
    const doc = JSON.parse(r.stdout) as { checks: { id: FindingId; fix: string[] }[] };
    const lines = doc.checks.flatMap((c) => c.fix).filter((f) => f.includes("pwn"));
    const ids = new Set(doc.checks.filter((c) => c.fix.some((f) => f.includes("pwn"))).map((c) => c.id));
    assert(ids.has("veths") && ids.has("pod-network-routes"), `fix lines naming the links: ${[...ids]}`);
    // Pasted into a shell as an operator would (no command can run: PATH is empty; only expansions do).
    const dir = await Deno.makeTempDir({ prefix: "flanctl-paste-" });
    try {
      for (const line of lines) {
        await new Deno.Command("/bin/sh", {
          args: ["-c", line],
          cwd: dir,
          env: { PATH: "/nonexistent" },
          clearEnv: true,
        })
          .output();
      }
      assertEquals(
        [...Deno.readDirSync(dir)].map((e) => e.name),
        [],
        `pasting ran code:\n${lines.join("\n")}`,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
    // Each name is one single-quoted word.
    for (const name of HOSTILE) {
      assert(lines.some((l) => l.includes(`'${name}'`)), `${name}: ${lines.join("\n")}`);
    }

    // Tables: no raw ESC from names (doctor's table is not coloured off a terminal; inspect lists links).
    const table = await flanctl(doctorArgs(n));
    assert(table.stdout.includes("veth\\x1b]0;T"), `the name is shown escaped:\n${table.stdout}`);
    assert(!table.stdout.includes("\x1b"), "doctor's table holds a raw ESC");
    const inspect = await flanctl(["inspect", "links", "--netns", N]);
    assertEquals(inspect.code, 0, inspect.stderr);
    assert(inspect.stdout.includes("e\\x1b[2Jz"), inspect.stdout);
    assert(!inspect.stdout.includes("\x1b"), "inspect's table holds a raw ESC");
  });
});

needsRoot.test("output: a closed pipe (| head) ends doctor, status, inspect and lease quietly, same exit code", async () => {
  await withDoctorNode(async (n) => {
    const cmds = [
      doctorArgs(n),
      doctorArgs(n, "-o", "json"),
      ["status", "--netns", n.node, "--subnet-file", n.subnetFile, "--store-dir", n.storeDir],
      ["inspect", "all", "--netns", n.node],
      ["lease", "list", "--store-dir", n.storeDir],
    ];
    for (const args of cmds) {
      const alone = await flanctl(args);
      const line = `${flanctlCmd(...args).map(shq).join(" ")} | true`;
      const piped = await run(["bash", "-c", `set -o pipefail; ${line}`]);
      assertEquals(piped.stderr, "", `${args[0]}: stderr when the reader is gone`);
      assertEquals(piped.code, alone.code, `${args.join(" ")}: exit code piped into a closed reader`);
    }
  });
});
