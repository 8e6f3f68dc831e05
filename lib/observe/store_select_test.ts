import { assert, assertEquals, assertRejects } from "../../tests/assert.ts";
import { doctorStore } from "./store_select.ts";
import { FileStoreReader } from "../store/file/file_reader.ts";

Deno.test("doctorStore: file store read-only when it exists, an error when an explicit one is missing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-doctor-store-" });
  try {
    const given = doctorStore({ storeDir: dir }, true);
    assert(given.explicit);
    assert((await given.open!()) instanceof FileStoreReader);
    const missing = `${dir}/absent`;
    const bad = doctorStore({ storeDir: missing }, true);
    assert(bad.explicit);
    await assertRejects(() => bad.open!(), Error, "no such directory");
    // A default (not given) file store that does not exist is "no store".
    assertEquals(doctorStore({ storeDir: missing }, false), { open: null, explicit: false });
    // A store flag other than the file store's is explicit and opened lazily.
    const etcd = doctorStore({ etcdEndpoints: "http://127.0.0.1:1" }, false);
    assert(etcd.explicit && etcd.open !== null);
    assertEquals(
      (await Deno.readDir(dir)[Symbol.asyncIterator]().next()).done,
      true,
      "the doctor wrote nothing",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
