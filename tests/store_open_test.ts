/** Store selection and flags: flannel's names, FLANNELD_* env fallbacks, defaults. */
import { assertEquals, assertThrows } from "./assert.ts";
import { Command } from "commander";
import { addStoreOptions, leaseTtlMs, openStore, storeKind, type StoreOptions } from "../lib/store/open.ts";
import { UsageError } from "../lib/errors.ts";

function parse(args: string[], env: Record<string, string> = {}): StoreOptions {
  for (const [k, v] of Object.entries(env)) Deno.env.set(k, v);
  try {
    const cmd = addStoreOptions(new Command("t").exitOverride()).action(() => {});
    cmd.parse(args, { from: "user" });
    return cmd.opts() as StoreOptions;
  } finally {
    for (const k of Object.keys(env)) Deno.env.delete(k);
  }
}

Deno.test("store options: defaults, flags, FLANNELD_* env, selection", async () => {
  const d = parse([]);
  assertEquals([d.storeDir, d.etcdPrefix, d.netConfigPath, storeKind(d)], [
    "/var/lib/flanctl",
    "/coreos.com/network",
    "/etc/kube-flannel/net-conf.json",
    "file",
  ]);
  const e = parse(["--etcd-endpoints", "http://127.0.0.1:1", "--etcd-prefix", "/x"]);
  assertEquals([storeKind(e), e.etcdEndpoints, e.etcdPrefix], ["etcd", "http://127.0.0.1:1", "/x"]);
  const env = parse([], { FLANNELD_ETCD_ENDPOINTS: "http://10.0.0.1:2379", FLANNELD_ETCD_CAFILE: "/ca.pem" });
  assertEquals([storeKind(env), env.etcdEndpoints, env.etcdCafile], [
    "etcd",
    "http://10.0.0.1:2379",
    "/ca.pem",
  ]);
  assertEquals(storeKind(parse(["--kube-subnet-mgr", "--etcd-endpoints", "http://x:1"])), "kube");
  Deno.env.set("FLANNELD_KUBE_SUBNET_MGR", "true");
  try {
    assertEquals(storeKind(parse([])), "kube");
  } finally {
    Deno.env.delete("FLANNELD_KUBE_SUBNET_MGR");
  }
  assertEquals(leaseTtlMs(parse(["--lease-ttl", "2.5"])), 2500);
  assertThrows(() => leaseTtlMs(parse(["--lease-ttl", "soon"])), UsageError, "--lease-ttl");
  const dir = await Deno.makeTempDir();
  try {
    const s = await openStore(parse(["--store-dir", dir]));
    assertEquals(s.kind, "file");
    await s.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
