/**
 * Credentials in --etcd-endpoints URLs: never printed (unreachable etcd, bad password, a URL that does not
 * parse), and used as the etcd username/password when they are right.
 */
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { EtcdStore } from "../lib/store/etcd/etcd.ts";
import { splitCredentials } from "../lib/store/etcd/etcd_client.ts";
import { EtcdFixture, leaseCli } from "./store_helpers.ts";

const SECRET = "s3cr3tPW";

Deno.test("etcd URL credentials: split off, never printed, used for auth", async () => {
  assertEquals(splitCredentials(["http://u:p%40ss@10.0.0.1:2379", "http://u:p%40ss@10.0.0.2:2379"]), {
    endpoints: ["http://10.0.0.1:2379", "http://10.0.0.2:2379"],
    username: "u",
    password: "p@ss",
  });
  // Unreachable etcd: the error names the endpoint without the userinfo.
  const down = await leaseCli(["list", "--etcd-endpoints", `http://flannel:${SECRET}@127.0.0.1:1`]);
  assert(down.code !== 0);
  assert(!(down.stdout + down.stderr).includes(SECRET), down.stderr);
  assertStringIncludes(down.stderr, "http://127.0.0.1:1");
  // A URL that does not parse (an unencoded '/' in the password).
  const bad = await leaseCli(["list", "--etcd-endpoints", `http://flannel:${SECRET}/x@127.0.0.1:1`]);
  assert(bad.code !== 0);
  assert(!(bad.stdout + bad.stderr).includes(SECRET), bad.stderr);

  const etcd = new EtcdFixture();
  try {
    await etcd.start();
    await etcd.ctl("put", "/coreos.com/network/config", '{"Network":"10.7.0.0/16"}');
    await etcd.ctl("user", "add", "root:rootpw");
    await etcd.ctl("user", "grant-role", "root", "root");
    await etcd.ctl("user", "add", `flannel:${SECRET}`);
    await etcd.ctl("--user=root:rootpw", "role", "add", "flannel").catch(() => {});
    await etcd.ctl(
      "role",
      "grant-permission",
      "flannel",
      "--prefix=true",
      "readwrite",
      "/coreos.com/network/",
    )
      .catch(() => {});
    await etcd.ctl("user", "grant-role", "flannel", "flannel");
    await etcd.ctl("auth", "enable");
    const withCreds = etcd.url.replace("://", `://flannel:${SECRET}@`);
    const s = new EtcdStore({ endpoints: [withCreds], prefix: "/coreos.com/network" });
    try {
      assertEquals(s.client.endpoints, [etcd.url]);
      assertEquals((await s.getNetworkConfig()).network?.toString(), "10.7.0.0/16");
    } finally {
      await s.close();
    }
    const wrong = await leaseCli([
      "list",
      "--etcd-endpoints",
      etcd.url.replace("://", `://flannel:${SECRET}x@`),
    ]);
    assert(wrong.code !== 0);
    assert(!(wrong.stdout + wrong.stderr).includes(SECRET), wrong.stderr);
    assertStringIncludes(wrong.stderr, "authentication");
  } finally {
    await etcd.cleanup();
  }
});
