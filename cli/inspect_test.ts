/**
 * `flanctl inspect`'s arguments: usage errors, a missing namespace, --help, and a read without FFI permission
 * (the views against iproute2 in namespaces, as root: tests/inspect_test.ts).
 */
import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { flanctl, ROOT, run } from "../tests/netns.ts";

Deno.test("inspect: bad arguments exit 2, missing netns exits 1 naming it, --help works", async () => {
  const bad = await flanctl(["inspect", "bogus"]);
  assertEquals(bad.code, 2);
  assertStringIncludes(
    bad.stderr,
    "'bogus' is not one of links, veths, addrs, routes, neigh, fdb, wireguard, all",
  );
  const badOut = await flanctl(["inspect", "links", "-o", "yaml"]);
  assertEquals(badOut.code, 2);
  assertStringIncludes(badOut.stderr, "-o/--output: 'yaml'");
  const badNs = await flanctl(["inspect", "links", "--netns", "a/b"]);
  assertEquals(badNs.code, 2);
  for (const what of ["links", "veths"]) {
    const missing = await flanctl(["inspect", what, "--netns", "flanctl-missing-ns"]);
    assertEquals(missing.code, 1, what);
    assertStringIncludes(missing.stderr, "network namespace 'flanctl-missing-ns' not found");
  }
  const help = await flanctl(["inspect", "--help"]);
  assertEquals(help.code, 0);
  assertStringIncludes(help.stdout, "--netns <name>");
  // libnl is loaded lazily: without FFI permission --help still works, and a read fails cleanly.
  const noFfi = (args: string[]) =>
    run([
      Deno.execPath(),
      "run",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-run",
      "--allow-net",
      "--allow-sys",
      "--no-check",
      "--quiet",
      `${ROOT}main.ts`,
      ...args,
    ]);
  const h2 = await noFfi(["inspect", "--help"]);
  assertEquals(h2.code, 0, h2.stderr);
  const r2 = await noFfi(["inspect", "links"]);
  assertEquals(r2.code, 1);
  // The netlink socket is libc's (socket(2)): libc is the first library a kernel read loads.
  assertStringIncludes(r2.stderr, "flanctl: cannot load libc.so.6");
});
