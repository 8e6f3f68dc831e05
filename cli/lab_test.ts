/**
 * `flanctl lab list`, `lab logs NODE [-f]` and `lab up` name errors, against lab state files in a temp lab
 * root (FLANCTL_LAB_ROOT): no namespace is made.
 */
import { assert, assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { flanctl, flanctlCmd } from "../tests/netns.ts";
import type { LabState } from "../lib/lab/types.ts";
import type { LabListJson } from "../lib/lab/list.ts";

function fakeLab(root: string, name: string, nodes: number, ipFamily?: "dual"): LabState {
  const dir = `${root}/${name}`;
  const s = {
    version: 1,
    name,
    dir,
    backend: "vxlan",
    store: "file",
    network: "10.244.0.0/16",
    ...(ipFamily ? { ipFamily } : {}),
    createdAt: "2026-01-02T03:04:05.000Z",
    underlay: {
      netns: `${name}-underlay`,
      bridge: "br0",
      cidr: "192.168.100.0/24",
      gateway: "192.168.100.1",
    },
    storeFlags: ["--store-dir", `${dir}/store`],
    healthzPort: 10251,
    netns: [],
    nodes: Array.from({ length: nodes }, (_, i) => ({
      name: `node${i + 1}`,
      netns: `${name}-node${i + 1}`,
      dir: `${dir}/node${i + 1}`,
      publicIP: `192.168.100.${11 + i}`,
    })),
    pods: [],
    procs: [],
  } as unknown as LabState;
  Deno.mkdirSync(`${dir}/node1`, { recursive: true });
  Deno.writeTextFileSync(`${dir}/state.json`, JSON.stringify(s));
  return s;
}

async function withRoot(fn: (root: string, env: Record<string, string>) => Promise<void>): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "flanctl-labroot-" });
  try {
    await fn(root, { FLANCTL_LAB_ROOT: root });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

Deno.test("lab list: every lab under the lab root, as a table and as JSON (contract)", async () => {
  await withRoot(async (root, env) => {
    let r = await flanctl(["lab", "list"], { env });
    assertEquals(r.code, 0, r.stderr);
    assertStringIncludes(r.stdout, "no labs");
    fakeLab(root, "beta", 1, "dual");
    fakeLab(root, "alpha", 2);
    Deno.mkdirSync(`${root}/notalab`);
    r = await flanctl(["lab", "list", "-o", "json"], { env });
    assertEquals(r.code, 0, r.stderr);
    const labs = JSON.parse(r.stdout) as LabListJson[];
    assertEquals(labs.map((l) => [l.name, l.ipFamily, l.nodes, l.daemonsRunning]), [
      ["alpha", "ipv4", 2, 0],
      ["beta", "dual", 1, 0],
    ]);
    assertEquals(Object.keys(labs[0]), [
      "name",
      "backend",
      "store",
      "network",
      "ipFamily",
      "nodes",
      "pods",
      "daemonsRunning",
      "createdAt",
    ]);
    r = await flanctl(["lab", "list"], { env });
    const rows = r.stdout.trimEnd().split("\n");
    assertEquals(rows[0].split(/\s+/), [
      "NAME",
      "BACKEND",
      "STORE",
      "NETWORK",
      "FAMILY",
      "NODES",
      "PODS",
      "DAEMONS",
      "CREATED",
    ]);
    assertEquals(rows.slice(1).map((l) => l.split(/\s+/)[4]), ["ipv4", "dual"]);
    assertEquals(rows.slice(1).map((l) => l.split(/\s+/)[0]), ["alpha", "beta"]);
    r = await flanctl(["lab", "list", "-o", "yaml"], { env });
    assertEquals(r.code, 2);
    assertStringIncludes(r.stderr, "-o/--output: 'yaml' is not an output format; use table or json");
  });
});

Deno.test("lab logs: prints a node's daemon log, -f follows it, an unknown node is named", async () => {
  await withRoot(async (root, env) => {
    const s = fakeLab(root, "lg", 2);
    const log = `${s.nodes[0].dir}/daemon.log`;
    Deno.writeTextFileSync(log, 'level=info msg="first"\n');
    let r = await flanctl(["lab", "logs", "node1", "--name", "lg"], { env });
    assertEquals([r.code, r.stdout], [0, 'level=info msg="first"\n'], r.stderr);
    r = await flanctl(["lab", "logs", "node9", "--name", "lg"], { env });
    assertEquals(r.code, 1);
    assertStringIncludes(r.stderr, "lab 'lg' has no node 'node9'; nodes: node1, node2");
    r = await flanctl(["lab", "logs", "node2", "--name", "lg"], { env });
    assertEquals(r.code, 1);
    assertStringIncludes(r.stderr, "no daemon log yet");

    const [exe, ...args] = flanctlCmd("lab", "logs", "node1", "-f", "--name", "lg");
    const p = new Deno.Command(exe, { args: args, env, stdout: "piped", stderr: "piped" }).spawn();
    const reader = p.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    const until = async (text: string) => {
      const deadline = Date.now() + 30_000;
      while (!out.includes(text)) {
        assert(Date.now() < deadline, `lab logs -f printed only ${JSON.stringify(out)}`);
        const { value, done } = await reader.read();
        if (done) break;
        out += value;
      }
    };
    try {
      await until("first");
      await Deno.writeTextFile(log, 'level=info msg="second"\n', { append: true });
      await until("second");
      assertEquals(out, 'level=info msg="first"\nlevel=info msg="second"\n');
    } finally {
      p.kill("SIGINT");
      await reader.cancel();
      await p.stderr.cancel();
      const st = await p.status;
      assertEquals(st.code, 0, "Ctrl-C ends -f cleanly");
    }
  });
});

Deno.test("lab up: a bad --name is a usage error that suggests a valid one", async () => {
  await withRoot(async (_root, env) => {
    const r = await flanctl(["lab", "up", "--name", "My_Lab"], { env });
    assertEquals(r.code, 2, r.stderr);
    assertStringIncludes(
      r.stderr,
      "flanctl: --name: 'My_Lab' is not a lab name (1-12 lower-case letters or digits, starting with a letter); " +
        "try --name mylab",
    );
  });
});
