/** Store selection and flags: flannel's names, FLANNELD_* env fallbacks, defaults. */
import {
  assert,
  assertEquals,
  assertRejects,
  assertStringIncludes,
  assertThrows,
} from "../../tests/assert.ts";
import { Command } from "commander";
import {
  addStoreOptions,
  leaseTtlMs,
  openStore,
  storeChoice,
  storeKind,
  StoreOpenError,
  type StoreOptions,
} from "./open.ts";
import { UsageError } from "../base/errors.ts";
import { flanctlCmd, run } from "../../tests/netns.ts";

function parse(args: string[]): StoreOptions {
  let got: StoreOptions = {};
  const cmd = addStoreOptions(new Command("t").exitOverride().configureOutput({ writeErr: () => {} }));
  cmd.action(() => {
    got = cmd.opts() as StoreOptions;
  });
  cmd.parse(args, { from: "user" });
  return got;
}

/**
 * The options parsed with FLANNELD_* variables `env` set, in a child process: setting them here would
 * reach every child that test files running beside this one start meanwhile (one process, one env).
 */
async function parseEnv(env: Record<string, string>): Promise<StoreOptions | { error: string }> {
  const code = `
    import { Command } from "commander";
    import { addStoreOptions } from ${JSON.stringify(new URL("./open.ts", import.meta.url).href)};
    const cmd = addStoreOptions(new Command("t").exitOverride().configureOutput({ writeErr: () => {} }));
    let got = {};
    cmd.action(() => { got = cmd.opts(); });
    try {
      cmd.parse([], { from: "user" });
      console.log(JSON.stringify(got));
    } catch (e) {
      console.log(JSON.stringify({ error: e.constructor.name + ": " + e.message }));
    }`;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--quiet", code],
    cwd: new URL("../..", import.meta.url).pathname,
    env,
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
  return JSON.parse(text);
}

Deno.test("store options: defaults, flags, FLANNELD_* env, selection", async () => {
  const d = parse([]);
  assertEquals([d.storeDir, d.etcdPrefix, d.netConfigPath, storeKind(d)], [
    undefined,
    "/coreos.com/network",
    "/etc/kube-flannel/net-conf.json",
    "etcd",
  ]);
  assert(storeChoice(d).implicit);
  assertStringIncludes(storeChoice(d).why, "http://127.0.0.1:4001,http://127.0.0.1:2379");
  assertEquals(storeChoice(parse(["--store-dir", "/x"])), {
    kind: "file",
    why: "--store-dir is set",
    implicit: false,
  });
  assertEquals(storeKind(parse(["--store", "file"])), "file");
  assertThrows(
    () => storeChoice(parse(["--store-dir", "/x", "--etcd-endpoints", "http://x:1"])),
    UsageError,
    "--store-dir: conflicts with --etcd-endpoints",
  );
  assertThrows(() => parse(["--store", "disk"]), Error, "disk");
  assertStringIncludes(
    new StoreOpenError(storeChoice(d), new Error("connection refused")).message,
    "etcd store (no --etcd-endpoints, --kube-subnet-mgr or --store-dir: flanneld's default etcd " +
      "http://127.0.0.1:4001,http://127.0.0.1:2379): connection refused",
  );
  const e = parse(["--etcd-endpoints", "http://127.0.0.1:1", "--etcd-prefix", "/x"]);
  assertEquals([storeKind(e), e.etcdEndpoints, e.etcdPrefix], ["etcd", "http://127.0.0.1:1", "/x"]);
  const env = await parseEnv({
    FLANNELD_ETCD_ENDPOINTS: "http://10.0.0.1:2379",
    FLANNELD_ETCD_CAFILE: "/ca.pem",
  });
  assert(!("error" in env), JSON.stringify(env));
  assertEquals([storeKind(env), env.etcdEndpoints, env.etcdCafile], [
    "etcd",
    "http://10.0.0.1:2379",
    "/ca.pem",
  ]);
  assertEquals(storeKind(parse(["--kube-subnet-mgr", "--etcd-endpoints", "http://x:1"])), "kube");
  const kind = async (v: string) => {
    const o = await parseEnv({ FLANNELD_KUBE_SUBNET_MGR: v });
    return "error" in o ? o.error : storeKind(o);
  };
  assertEquals(await kind("true"), "kube");
  assertEquals(await kind("false"), "etcd");
  const bad = await kind("yes please");
  assertStringIncludes(bad, "UsageError: ");
  assertStringIncludes(bad, "--kube-subnet-mgr");
  assertEquals(leaseTtlMs(parse(["--lease-ttl", "2.5"])), 2500);
  assertThrows(() => leaseTtlMs(parse(["--lease-ttl", "soon"])), UsageError, "--lease-ttl");
  const dir = await Deno.makeTempDir();
  try {
    const s = await openStore(parse(["--store-dir", dir]));
    assertEquals(s.kind, "file");
    await s.close();
    // --etcd-password-file: read from the file; both forms at once is a usage error.
    await Deno.writeTextFile(`${dir}/pw`, "s3cret\n");
    await assertRejects(
      () =>
        openStore({ etcdEndpoints: "http://127.0.0.1:1", etcdPassword: "x", etcdPasswordFile: `${dir}/pw` }),
      UsageError,
      "--etcd-password-file: conflicts with --etcd-password",
    );
    await assertRejects(
      () => openStore({ etcdEndpoints: "http://127.0.0.1:1", etcdPasswordFile: `${dir}/nope` }),
      UsageError,
      "--etcd-password-file: cannot read",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("--etcd-password-file: a FIFO or /dev/zero is a usage error naming it, never a hang", async () => {
  const dir = await Deno.makeTempDir();
  try {
    assertEquals((await run(["mkfifo", `${dir}/pw.fifo`])).code, 0);
    for (const [path, kind] of [[`${dir}/pw.fifo`, "a FIFO"], ["/dev/zero", "a character device"]]) {
      // Under timeout: a read that blocks on the FIFO (or never ends on /dev/zero) shows up as exit 124.
      const r = await run([
        "timeout",
        "30",
        ...flanctlCmd(
          "lease",
          "list",
          "--etcd-endpoints",
          "http://127.0.0.1:1",
          "--etcd-password-file",
          path,
        ),
      ]);
      assert(r.code !== 124, `--etcd-password-file ${path} hung`);
      assertEquals(r.code, 2, r.stderr);
      assertStringIncludes(r.stderr, `--etcd-password-file: cannot read ${path} (${path}: is ${kind}`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
