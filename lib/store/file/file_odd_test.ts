/**
 * The file store's files are read with a cap and a type check (lib/base/capped_read.ts): a FIFO or
 * /dev/zero as `<dir>/config` is a clear error from `flanctl lease config get` (never a hang, never a
 * read without end), and a FIFO or /dev/zero among the lease files is a skipped malformed lease while the
 * other leases are listed. Everything lives in a temp directory; nothing touches the network. Commands
 * run under `timeout`, so a regression fails instead of hanging.
 */
import { assert, assertEquals, assertStringIncludes } from "../../../tests/assert.ts";
import { FileStore } from "./file.ts";
import { flanctlCmd, run } from "../../../tests/netns.ts";
import { NET50 } from "../../../tests/store_helpers.ts";

const attrs = {
  PublicIP: "192.0.2.1",
  PublicIPv6: null,
  BackendType: "vxlan",
  BackendData: { VNI: 1, VtepMAC: "aa:bb:cc:dd:ee:01" },
};

function lease(...args: string[]) {
  return run(["timeout", "-s", "KILL", "30", ...flanctlCmd("lease", ...args)]);
}

Deno.test("file store: a FIFO or /dev/zero as config or lease file is refused with the reason, no hang", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-store-odd-" });
  try {
    const s = new FileStore({ dir, warn: () => {} });
    await s.setNetworkConfig(NET50);
    const own = await s.acquireLease(attrs);
    const good = Deno.readTextFileSync(`${dir}/config`);

    for (
      const [what, make, kind] of [
        ["FIFO", () => run(["mkfifo", `${dir}/config`]), "a FIFO"],
        [
          "/dev/zero",
          () => Promise.resolve(Deno.symlinkSync("/dev/zero", `${dir}/config`)),
          "a symlink to a file outside", // refused before it is opened (lib/base/capped_read.ts)
        ],
      ] as const
    ) {
      Deno.removeSync(`${dir}/config`);
      await make();
      const r = await lease("config", "get", "--store-dir", dir);
      assert(
        r.code !== 0 && r.code !== 137,
        `${what} as config: exit ${r.code} (137: killed by the timeout)`,
      );
      assertStringIncludes(r.stderr, `${dir}/config: is ${kind}`, what);
    }
    Deno.removeSync(`${dir}/config`);
    Deno.writeTextFileSync(`${dir}/config`, good);

    // Odd lease files: skipped with the reason; the real lease is still listed. Their names avoid the
    // subnet the store drew at random for the real lease (else mkfifo finds the name taken).
    const [fifo, zero] = ["10.5.9.0-24", "10.5.10.0-24", "10.5.11.0-24"]
      .filter((n) => n !== String(own.subnet).replace("/", "-"));
    const made = await run(["mkfifo", `${dir}/subnets/${fifo}`]);
    assertEquals(made.code, 0, `mkfifo: ${made.stderr}`);
    Deno.symlinkSync("/dev/zero", `${dir}/subnets/${zero}`);
    const l = await lease("list", "--store-dir", dir, "-o", "json");
    assertEquals(l.code, 0, `lease list: exit ${l.code}: ${l.stderr}`);
    assertStringIncludes(l.stdout, String(own.subnet));
    assertStringIncludes(l.stderr, fifo);
    assertStringIncludes(l.stderr, "a FIFO");
    assertStringIncludes(l.stderr, zero);
    assertStringIncludes(l.stderr, "a symlink to a file outside"); // /dev/zero: refused before it is opened
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
