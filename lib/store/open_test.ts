import { assertEquals } from "../../tests/assert.ts";
import { DEFAULT_STORE_DIR } from "./file/file.ts";
import { storeRecord, withRecordedStore } from "./open.ts";
import { parseStoreRecord, type StoreRecord } from "./record.ts";

Deno.test("storeRecord: the chosen store's fields only, no password, paths absolute", () => {
  assertEquals(
    storeRecord(
      {
        store: "etcd",
        etcdEndpoints: "https://alice:s3cret@etcd1:2379, http://etcd2:2379",
        etcdCafile: "pki/ca.pem",
        etcdPasswordFile: "/etc/flanctl/etcd-pass",
        storeDir: "/var/lib/flanctl/store", // not the chosen store's
        kubeconfigFile: "/root/.kube/config",
      },
      null,
      "/srv/",
    ),
    {
      kind: "etcd",
      etcdEndpoints: "https://etcd1:2379,http://etcd2:2379",
      etcdPrefix: "/coreos.com/network",
      etcdCafile: "/srv/pki/ca.pem",
      etcdUsername: "alice",
      etcdPasswordFile: "/etc/flanctl/etcd-pass",
    },
  );
  assertEquals(storeRecord({ store: "file", etcdPrefix: "/x" }, null, "/"), {
    kind: "file",
    storeDir: DEFAULT_STORE_DIR,
  });
  assertEquals(storeRecord({ kubeSubnetMgr: true, nodeName: "flag", kubeApiUrl: "" }, "resolved", "/"), {
    kind: "kube",
    nodeName: "resolved",
    netConfigPath: "/etc/kube-flannel/net-conf.json",
  });
});

Deno.test("parseStoreRecord: its kind's short printable strings only; another kind's fields are dropped", () => {
  assertEquals(parseStoreRecord(null), null);
  assertEquals(parseStoreRecord({ kind: "consul", storeDir: "/x" }), null);
  assertEquals(
    parseStoreRecord({
      kind: "file",
      storeDir: "/var/lib/s",
      // Before, any record field of any kind was kept: a file record carried etcd endpoints along.
      etcdEndpoints: "http://elsewhere:2379",
      nodeName: "n1",
    }),
    { kind: "file", storeDir: "/var/lib/s" },
  );
  assertEquals(
    parseStoreRecord({
      kind: "kube",
      nodeName: "n\x1b[2J",
      kubeApiUrl: "x".repeat(5000),
      kubeconfigFile: 7,
      netConfigPath: "/etc/kube-flannel/net-conf.json",
    }),
    { kind: "kube", netConfigPath: "/etc/kube-flannel/net-conf.json" },
  );
  // The compiler holds each kind to its own fields.
  // @ts-expect-error: a file store's record has no etcd endpoints
  const bad: StoreRecord = { kind: "file", etcdEndpoints: "http://e:2379" };
  assertEquals(bad.kind, "file");
});

Deno.test("withRecordedStore: the record when no flag chooses a store, the flags given on top", () => {
  const rec: StoreRecord = { kind: "etcd", etcdEndpoints: "http://e:2379", etcdPrefix: "/p" };
  assertEquals(
    withRecordedStore({ etcdPrefix: "/default" }, { etcdCafile: "/ca" }, rec, "/run/flannel/flanctl.json"),
    {
      etcdEndpoints: "http://e:2379",
      etcdPrefix: "/p",
      store: "etcd",
      recordedIn: "/run/flannel/flanctl.json",
      etcdCafile: "/ca",
    },
  );
  const all = { storeDir: "/s" };
  assertEquals(
    withRecordedStore(all, { storeDir: "/s" }, rec, "/f"),
    all,
    "a flag chooses: the record is not used",
  );
  assertEquals(withRecordedStore(all, {}, null, "/f"), all);
});
