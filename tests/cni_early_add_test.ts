/**
 * portmap's ADD without port mappings answered by the launcher (lib/cni/early_add.ts) against the full
 * plugin on the same environment and stdin bytes: same exit code, same stdout byte for byte, same deleted
 * record afterwards (lib/cni/deleted.ts). The full path is Deno (cli/cni_main.ts) with FLANCTL_CNI_TRACE=1,
 * so a launcher run that started Deno says so on stderr: a table shows which inputs are answered early and
 * that every doubtful one falls through; a property runs generated results (braces, quotes, escapes,
 * unicode, long strings, mutated bytes) through both. No root needed: an ADD without mappings touches no
 * kernel state, and the table's mappings are ones the full path refuses before any.
 */
import fc from "fast-check";
import { assert, assertEquals } from "./assert.ts";
import { checkAsync, mutated } from "./prop.ts";
import { earlyDelSh, shQuote } from "../lib/cni/launch.ts";
import { EARLY_ADD_MAX_BYTES, earlyAddSh, READER_DIED } from "../lib/cni/early_add.ts";
import { DELETED_DIR_ENV } from "../lib/cni/deleted.ts";
import { CNI_PLUGIN_NAMES } from "../lib/cni/names.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const FULL = [
  Deno.execPath(),
  "run",
  "-A",
  "--no-check",
  "--quiet",
  "--no-config",
  "--no-lock",
  `${ROOT}cli/cni_main.ts`,
];
const ID = "c0ffee0123456789";
const ENV = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: ID,
  CNI_NETNS: "/var/run/netns/pa-none",
  CNI_IFNAME: "eth0",
};
const PATH_ENV = { CNI_PATH: "/opt/cni/bin", PATH: "/usr/sbin:/usr/bin:/sbin:/bin", FLANCTL_CNI_TRACE: "1" };

/** A launcher like the installed ones (early DEL, early ADD, then Deno), as `<dir>/bin/portmap`. */
function launcher(dir: string, records: string): string {
  Deno.mkdirSync(`${dir}/bin`, { recursive: true });
  const exec = `FLANCTL_ARGV0="$0" exec ${FULL.map(shQuote).join(" ")}`;
  Deno.writeTextFileSync(
    `${dir}/bin/portmap`,
    `#!/bin/sh\ncase "\${0##*/}" in\n  ${CNI_PLUGIN_NAMES.join("|")})\n${earlyDelSh(records)}\n` +
      `${earlyAddSh(records, exec)}\n;;\nesac\n${exec}\n`,
    { mode: 0o755 },
  );
  return `${dir}/bin/portmap`;
}

interface Outcome {
  code: number;
  stdout: string;
  record: string | null;
  early: boolean;
}

const readRecord = (records: string, ifname: string, id: string) => {
  try {
    return Deno.readTextFileSync(`${records}/portmap:${ifname}:${id}`);
  } catch {
    return null;
  }
};

async function run(cmd: string[], env: Record<string, string>, stdin: Uint8Array, records: string) {
  const p = new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    env: { ...PATH_ENV, ...env, [DELETED_DIR_ENV]: records },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = p.stdin.getWriter();
  await w.write(stdin).catch(() => {});
  await w.close().catch(() => {});
  const o = await p.output();
  const out: Outcome = {
    code: o.code,
    stdout: new TextDecoder().decode(o.stdout),
    record: readRecord(records, env.CNI_IFNAME ?? "", env.CNI_CONTAINERID ?? ""),
    early: !new TextDecoder().decode(o.stderr).includes("trace "),
  };
  return out;
}

/** The launcher and the full path on the same input, each from the same record state; the launcher's outcome. */
async function both(
  dir: string,
  stdin: string | Uint8Array,
  env: Record<string, string> = ENV,
  record: string | null = null,
  makeDir = true,
): Promise<Outcome> {
  const bytes = typeof stdin === "string" ? new TextEncoder().encode(stdin) : stdin;
  const outs: Outcome[] = [];
  for (const which of ["early", "full"]) {
    const records = `${dir}/records-${which}`;
    try {
      Deno.removeSync(records, { recursive: true });
    } catch { /* not there */ }
    if (makeDir) Deno.mkdirSync(records, { recursive: true });
    if (record !== null) {
      Deno.writeTextFileSync(`${records}/portmap:${env.CNI_IFNAME}:${env.CNI_CONTAINERID}`, record);
    }
    outs.push(
      which === "early"
        ? await run([launcher(dir, records)], env, bytes, records)
        : await run(FULL, { ...env, FLANCTL_ARGV0: "portmap" }, bytes, records),
    );
  }
  const [l, f] = outs;
  assert(!f.early, "the full path traces");
  assertEquals(
    { code: l.code, stdout: l.stdout, record: l.record },
    { code: f.code, stdout: f.stdout, record: f.record },
    new TextDecoder().decode(bytes).slice(0, 400),
  );
  return l;
}

const PREV_031 = {
  cniVersion: "0.3.1",
  interfaces: [{ name: "cni0", mac: "6e:2b:aa:01:02:03" }, { name: "veth1", mac: "4a:11:22:33:44:55" }, {
    name: "eth0",
    mac: "0a:58:0a:f4:01:05",
    sandbox: "/var/run/netns/cni-1234",
  }],
  ips: [{ version: "4", interface: 2, address: "10.244.1.5/24", gateway: "10.244.1.1" }],
  routes: [{ dst: "10.244.0.0/16", gw: "10.244.1.1" }, { dst: "0.0.0.0/0", gw: "10.244.1.1" }],
  dns: {},
};
const PREV_11 = {
  cniVersion: "1.1.0",
  dns: { nameservers: ["10.96.0.10"], domain: "cluster.local", search: ["a.b", "c"], options: ["ndots:5"] },
  interfaces: [{ mac: "0a:58:0a:f4:01:05", mtu: 1450, name: "eth0", sandbox: "/var/run/netns/x", pciID: "" }],
  ips: [{ address: "fd00::5/64", gateway: "fd00::1", interface: 0 }, { address: "10.244.1.5/24" }],
  routes: [{ dst: "::/0", gw: "fd00::1", mtu: 1400, table: 0, scope: -1, priority: 100, advmss: 1360 }],
};
const conf = (version: string, prev: unknown, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    type: "portmap",
    capabilities: { portMappings: true },
    cniVersion: version,
    name: "cbr0",
    ...extra,
    prevResult: prev,
  });
const re = (version: string, prev: Record<string, unknown>) => ({ ...prev, cniVersion: version });

Deno.test({
  name: "cni early ADD: the launcher answers portmap without mappings as the full plugin, else Deno runs",
  sanitizeResources: false,
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "pa-early-add-" });
    try {
      Deno.mkdirSync(`${dir}/fake`);
      Deno.writeTextFileSync(`${dir}/fake/mawk`, "#!/bin/sh\nexit 3\n", { mode: 0o755 });
      const cases: [string, string | Uint8Array, boolean, Record<string, string>?, string?][] = [
        ["containerd 1.6, flannel's 0.3.1 conflist, no runtimeConfig", conf("0.3.1", PREV_031), true],
        ["0.4.0", conf("0.4.0", re("0.4.0", PREV_031)), true],
        [
          "1.0.0, go-cni's empty list",
          conf("1.0.0", re("1.0.0", PREV_031), { runtimeConfig: { portMappings: [] } }),
          true,
        ],
        ["1.1.0 with every field", conf("1.1.0", PREV_11), true],
        ["1.0.0 drops 1.1 fields", conf("1.0.0", re("1.0.0", PREV_11)), true],
        [
          "options the full path accepts",
          conf("1.0.0", re("1.0.0", PREV_031), {
            snat: false,
            masqAll: true,
            markMasqBit: 5,
            backend: "nftables",
          }),
          true,
        ],
        [
          "escapes and unicode",
          conf("1.0.0", { cniVersion: "1.0.0", interfaces: [{ name: 'e\u00e9\ud83d\ude00"\\/\n\u001f<&' }] }),
          true,
        ],
        [
          "go's \\u escapes",
          conf("1.0.0", re("1.0.0", PREV_031)).replace("/var/run", "\\u002fvar\\u003crun"),
          true,
        ],
        [
          "whitespace and a newline",
          JSON.stringify(JSON.parse(conf("1.0.0", re("1.0.0", PREV_031))), null, 2) + "\n",
          true,
        ],
        ["a record filled before", conf("1.0.0", re("1.0.0", PREV_031)), true, ENV, "deleted\n"],
        ["a record emptied before", conf("1.0.0", re("1.0.0", PREV_031)), true, ENV, ""],
        [
          "mappings",
          conf("1.0.0", re("1.0.0", PREV_031), { runtimeConfig: { portMappings: [{ hostPort: 0 }] } }),
          false,
        ],
        ["mappings, go-cni's keys", conf("1.0.0", PREV_031, { runtimeConfig: { PortMappings: [] } }), false],
        [
          "portMappings null",
          conf("1.0.0", re("1.0.0", PREV_031), { runtimeConfig: { portMappings: null } }),
          false,
        ],
        ["prevResult of another version", conf("1.0.0", PREV_031), false],
        ["cniVersion 0.2.0", conf("0.2.0", re("0.2.0", PREV_031)), false],
        ["no cniVersion", JSON.stringify({ name: "cbr0", type: "portmap", prevResult: PREV_031 }), false],
        ["a bad name", conf("1.0.0", re("1.0.0", PREV_031), { name: "-x" }), false],
        ["no prevResult", JSON.stringify({ cniVersion: "1.0.0", name: "cbr0", type: "portmap" }), false],
        ["snat not a bool", conf("1.0.0", re("1.0.0", PREV_031), { snat: "yes" }), false],
        ["markMasqBit 40", conf("1.0.0", re("1.0.0", PREV_031), { markMasqBit: 40 }), false],
        ["backend bpf", conf("1.0.0", re("1.0.0", PREV_031), { backend: "bpf" }), false],
        [
          "conditionsV4",
          conf("1.0.0", re("1.0.0", PREV_031), { conditionsV4: ["ip", "saddr", "1.2.3.4"] }),
          false,
        ],
        [
          "a __proto__ carrying mappings",
          `{"__proto__":{"runtimeConfig":{"portMappings":[{"hostPort":0}]}},` +
          conf("1.0.0", re("1.0.0", PREV_031)).slice(1),
          false,
        ],
        ["a case variant of name", conf("1.0.0", re("1.0.0", PREV_031), { NAME: "other" }), false],
        [
          "a duplicate key",
          conf("1.0.0", re("1.0.0", PREV_031)).replace('"name":"cbr0"', '"name":"cbr0","name":"x"'),
          false,
        ],
        ["an unknown prevResult field", conf("1.0.0", { ...re("1.0.0", PREV_031), Ips: [] }), false],
        [
          "a key naming two fields",
          conf("1.0.0", { cniVersion: "1.0.0", interfaces: [{ name: "e", "mac sandbox": "x" }] }),
          false,
        ],
        [
          "a float in prevResult",
          conf("1.1.0", { ...PREV_11, interfaces: [{ name: "e", mtu: 1.5 }] }),
          false,
        ],
        ["\\u beyond ASCII", conf("1.0.0", re("1.0.0", PREV_031)).replace("cni0", "cni\\u00e9"), false],
        [
          "invalid UTF-8",
          new Uint8Array([
            ...new TextEncoder().encode(conf("1.0.0", re("1.0.0", PREV_031)).replace("cni0", "cni")).slice(
              0,
              120,
            ),
            0xff,
            ...new TextEncoder().encode(conf("1.0.0", re("1.0.0", PREV_031))).slice(120),
          ]),
          false,
        ],
        ["a NUL", conf("1.0.0", re("1.0.0", PREV_031)).replace("cni0", "cni\u0000"), false],
        ["trailing garbage, no newline", conf("1.0.0", re("1.0.0", PREV_031)) + "x", false],
        ["an unterminated string", '{"cniVersion":"1.0.0","name":"cbr0', false],
        ["empty", "", false],
        ["too big", conf("1.0.0", re("1.0.0", PREV_031), { pad: "x".repeat(EARLY_ADD_MAX_BYTES) }), false],
        // mawk reads one byte over the limit; Deno gets that replay, then the rest of the runtime's stdin.
        ["20 KiB", conf("1.0.0", re("1.0.0", PREV_031), { pad: "x\u0000".repeat(4000) }), false],
        ["1 MiB", conf("1.0.0", re("1.0.0", PREV_031), { pad: "\u00e9".repeat(1 << 19) }), false],
        ["exactly the limit", conf("1.0.0", re("1.0.0", PREV_031)).padEnd(EARLY_ADD_MAX_BYTES, " "), true],
        ["one byte over", conf("1.0.0", re("1.0.0", PREV_031)).padEnd(EARLY_ADD_MAX_BYTES + 1, " "), false],
        ["no netns", conf("1.0.0", re("1.0.0", PREV_031)), false, { ...ENV, CNI_NETNS: "" }],
        ["a bad ID", conf("1.0.0", re("1.0.0", PREV_031)), false, { ...ENV, CNI_CONTAINERID: "-c" }],
        ["a long ifname", conf("1.0.0", re("1.0.0", PREV_031)), false, {
          ...ENV,
          CNI_IFNAME: "abcdefghijklmnop",
        }],
        ["DEL", conf("1.0.0", re("1.0.0", PREV_031)), false, { ...ENV, CNI_COMMAND: "DEL" }],
        ["no mawk on PATH", conf("1.0.0", re("1.0.0", PREV_031)), false, { ...ENV, PATH: "/nonexistent" }],
        // A mawk that dies before reading: stdin is still the runtime's, and Deno gets all of it.
        ["a mawk that dies", conf("1.0.0", re("1.0.0", PREV_031)), false, {
          ...ENV,
          PATH: `${dir}/fake:/usr/bin:/bin`,
        }],
      ];
      for (const [what, stdin, early, env, record] of cases) {
        const l = await both(dir, stdin, env, record ?? null);
        assertEquals(l.early, early, what);
      }
      // No records directory: Deno runs (it makes the directory).
      const l = await both(dir, conf("1.0.0", re("1.0.0", PREV_031)), ENV, null, false);
      assertEquals(l.early, false, "no records directory");
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "cni early ADD: a stdin over the full path's 16 MiB cap answers as the full path does, at once",
  sanitizeResources: false,
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "pa-early-add-" });
    try {
      const big = conf("1.0.0", re("1.0.0", PREV_031), { pad: "x".repeat(16 * 1024 * 1024) });
      const l = await both(dir, big);
      assertEquals({ code: l.code, early: l.early }, { code: 1, early: false });
      assert(l.stdout.includes('"code":5') && l.stdout.includes("stdin too large"), l.stdout);
      // An endless stdin: the launcher's mawk reads 16 KiB + 1, Deno stops at its cap (mawk used to read on).
      const records = `${dir}/records-yes`;
      Deno.mkdirSync(records);
      const t0 = performance.now();
      const o = await new Deno.Command("sh", {
        args: ["-c", `yes '{"a":1}' | timeout 60 ${shQuote(launcher(dir, records))}`],
        env: { ...PATH_ENV, ...ENV, [DELETED_DIR_ENV]: records },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const ms = performance.now() - t0;
      const out = new TextDecoder().decode(o.stdout);
      assertEquals(o.code, 1, out);
      assert(out.includes('"code":5') && out.includes("stdin too large"), out);
      assert(ms < 30_000, `${ms} ms`);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "cni early ADD: mawk dying mid-read answers an I/O error, never Deno on the rest; Deno runs once",
  sanitizeResources: false,
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "pa-early-add-" });
    try {
      const records = `${dir}/records`;
      Deno.mkdirSync(records);
      Deno.mkdirSync(`${dir}/dies`);
      // Says it is reading (as the real program does after its probe), reads part of the config, is killed.
      Deno.writeTextFileSync(
        `${dir}/dies/mawk`,
        "#!/bin/sh\nprintf 'read\\n'\nhead -c 100 >/dev/null\nkill -KILL $$\n",
        { mode: 0o755 },
      );
      const env = { ...ENV, PATH: `${dir}/dies:/usr/bin:/bin` };
      const l = await run(
        [launcher(dir, records)],
        env,
        new TextEncoder().encode(conf("1.0.0", PREV_031)),
        records,
      );
      assertEquals(l, { code: 1, stdout: READER_DIED + "\n", record: null, early: true });
      assertEquals(JSON.parse(READER_DIED).code, 5);

      // The real mawk, killed once its head started reading a config that has not all arrived.
      Deno.mkdirSync(`${dir}/real`);
      Deno.writeTextFileSync(
        `${dir}/real/mawk`,
        `#!/bin/sh\necho $$ >${shQuote(`${dir}/mawk.pid`)}\nexec /usr/bin/mawk "$@"\n`,
        { mode: 0o755 },
      );
      const c = conf("1.0.0", re("1.0.0", PREV_031));
      const p = new Deno.Command(launcher(dir, records), {
        env: { ...PATH_ENV, ...ENV, PATH: `${dir}/real:/usr/bin:/bin`, [DELETED_DIR_ENV]: records },
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const w = p.stdin.getWriter();
      await w.write(new TextEncoder().encode(c.slice(0, 40)));
      let pid = "";
      for (let i = 0; i < 500; i++) {
        try {
          pid = Deno.readTextFileSync(`${dir}/mawk.pid`).trim();
          if (Deno.readTextFileSync(`/proc/${pid}/task/${pid}/children`).trim() !== "") break;
        } catch { /* not yet */ }
        await new Promise((r) => setTimeout(r, 10));
      }
      Deno.kill(Number(pid), "SIGKILL");
      await w.write(new TextEncoder().encode(c.slice(40))).catch(() => {});
      await w.close().catch(() => {});
      const o = await p.output();
      assertEquals(
        { code: o.code, stdout: new TextDecoder().decode(o.stdout) },
        { code: 1, stdout: READER_DIED + "\n" },
      );
      assert(!new TextDecoder().decode(o.stderr).includes("trace "), "Deno did not start");

      // A Deno that exits 125 (the old launcher's "stdin not read" status) is not started again.
      const count = `${dir}/count`;
      const once = `exec sh -c 'cat >/dev/null; echo x >>${count}; exit 125'`;
      Deno.mkdirSync(`${dir}/b125`);
      Deno.writeTextFileSync(`${dir}/b125/portmap`, `#!/bin/sh\n${earlyAddSh(records, once)}\n${once}\n`, {
        mode: 0o755,
      });
      Deno.mkdirSync(`${dir}/skips`);
      Deno.writeTextFileSync(`${dir}/skips/mawk`, "#!/bin/sh\nprintf 'skip\\n'\n", { mode: 0o755 });
      for (const [what, path] of [["full", "/usr/bin:/bin"], ["skip", `${dir}/skips:/usr/bin:/bin`]]) {
        Deno.writeTextFileSync(count, "");
        const r = await new Deno.Command("sh", {
          args: ["-c", `printf '%s' "$C" | ${shQuote(`${dir}/b125/portmap`)}`],
          env: { ...PATH_ENV, ...ENV, PATH: path, C: conf("1.0.0", PREV_031) },
        }).output();
        assertEquals(
          { code: r.code, starts: Deno.readTextFileSync(count) },
          { code: 125, starts: "x\n" },
          what,
        );
      }
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

const tricky = fc.oneof(
  { arbitrary: fc.stringMatching(/^[a-z0-9:./-]{0,16}$/), weight: 6 },
  fc.constantFrom(
    "",
    "eth0",
    "{",
    "}",
    '"',
    "\\",
    "\\u0041",
    "/",
    "\n",
    "\u0000",
    "\u007f",
    "\u00e9",
    "\u2028",
    "\ud83d\ude00",
    "a:b",
  ),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.string({ maxLength: 3 }).chain((s) =>
    fc.integer({ min: 1000, max: 12000 }).map((n) => s.repeat(n).slice(0, n))
  ),
);
const num = fc.oneof(
  { arbitrary: fc.integer({ min: -5, max: 70000 }), weight: 6 },
  fc.constantFrom(0, 1.5, -0, 1e21),
);
const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined, freq: 2 });
const prevResult = fc.record({
  interfaces: opt(fc.array(
    fc.record({
      name: tricky,
      mac: opt(tricky),
      mtu: opt(num),
      sandbox: opt(tricky),
      socketPath: opt(tricky),
      pciID: opt(tricky),
    }),
    { maxLength: 3 },
  )),
  ips: opt(fc.array(
    fc.record({
      address: fc.oneof(tricky, fc.constantFrom("10.244.1.5/24", "fd00::5/64")),
      gateway: opt(tricky),
      interface: opt(num),
    }),
    { maxLength: 3 },
  )),
  routes: opt(fc.array(
    fc.record({
      dst: tricky,
      gw: opt(tricky),
      mtu: opt(num),
      table: opt(num),
      scope: opt(num),
      priority: opt(num),
      advmss: opt(num),
    }),
    { maxLength: 3 },
  )),
  dns: opt(
    fc.record({
      nameservers: opt(fc.array(tricky, { maxLength: 2 })),
      domain: opt(tricky),
      search: opt(fc.array(tricky, { maxLength: 2 })),
      options: opt(fc.array(tricky, { maxLength: 2 })),
    }),
  ),
}, { requiredKeys: [] });
const VERSIONS = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];
const input = fc.tuple(
  fc.constantFrom(...VERSIONS),
  fc.oneof({ arbitrary: fc.constant(null), weight: 3 }, fc.constantFrom(...VERSIONS)),
  prevResult,
  fc.constantFrom(undefined, [], null, [{ hostPort: 0 }]),
  fc.constantFrom(0, 0, 2),
).map(([v, pv, prev, maps, indent]) =>
  JSON.stringify(
    {
      cniVersion: v,
      name: "cbr0",
      type: "portmap",
      ...(maps === undefined ? {} : { runtimeConfig: { portMappings: maps } }),
      prevResult: { cniVersion: pv ?? v, ...prev },
    },
    null,
    indent,
  )
);

Deno.test({
  name:
    "cni early ADD: generated results and mutated bytes answer the same through the launcher as through Deno",
  sanitizeResources: false,
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "pa-early-add-" });
    let early = 0;
    try {
      await checkAsync(
        fc.asyncProperty(
          fc.oneof({ arbitrary: input, weight: 3 }, { arbitrary: mutated(input), weight: 1 }),
          async (s) => {
            if ((await both(dir, s)).early) early++;
          },
        ),
        40,
      );
      // The generator is not all doubt: a good share of the runs was answered early.
      assert(early >= 5, `only ${early} of the runs were answered by the launcher`);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});
