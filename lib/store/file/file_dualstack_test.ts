/**
 * Dual-stack and IPv6-only leases in the file store, checked as every store is (tests/store_dualstack.ts;
 * the etcd store's run needs a real etcd: tests/store_dualstack_test.ts).
 */
import { FileStore } from "./file.ts";
import { exercise, exerciseV6Only } from "../../../tests/store_dualstack.ts";

Deno.test("file store: dual-stack and IPv6-only leases as flanneld writes them", async () => {
  for (const v6only of [false, true]) {
    const dir = await Deno.makeTempDir({ prefix: "flanctl-store6-" });
    try {
      const s = new FileStore({ dir });
      const raw = async (key: string) =>
        JSON.stringify(JSON.parse(await Deno.readTextFile(`${dir}/subnets/${key}`)).lease);
      if (v6only) await exerciseV6Only(s, raw);
      else {
        await exercise(s, raw, async (key, value) => {
          // A foreign entry in the file store's own shape (the value as flanneld's JSON), announced by
          // bumping the store's sequence number as every writer does.
          const seq = Number((await Deno.readTextFile(`${dir}/seq`)).trim()) + 1;
          await Deno.writeTextFile(
            `${dir}/subnets/${key}`,
            `{"lease":${value},"expiration":null,"seq":${seq}}\n`,
          );
          await Deno.writeTextFile(`${dir}/seq`, `${seq}\n`);
        });
      }
      await s.close();
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});
