import { assert, assertEquals } from "../../tests/assert.ts";

// Each case runs in a fresh Deno process: being short-lived is a property of the whole process
// (lib/base/process_kind.ts), and the symbol table is bound once per process.
const FFI = new URL("./ffi.ts", import.meta.url).href;
const KIND = new URL("../base/process_kind.ts", import.meta.url).href;

/** Runs `short` or `long` in a fresh process: int-returning libc calls and what they returned. */
async function probe(kind: "short" | "long") {
  const code = `
    import { errno, libc, readCString, rt } from ${JSON.stringify(FFI)};
    import { markShortLived } from ${JSON.stringify(KIND)};
    if (${kind === "short"}) markShortLived();
    const c = libc();
    const bad = c.close(-1), badErrno = errno();
    const fd = c.open(new TextEncoder().encode("/dev/null\\0"), 0);
    // socket(AF_INET, SOCK_DGRAM, 0): a descriptor above the one just opened.
    const s = c.socket(2, 2, 0);
    c.close(s);
    const closed = c.close(fd);
    const trim = c.malloc_trim(0);
    const types = [bad, fd, closed, trim, s].map((v) => typeof v);
    // Pointer results: a libnl link's name is NULL until set.
    const link = rt().rtnl_link_alloc();
    const unnamed = readCString(rt().rtnl_link_get_name(link));
    rt().rtnl_link_set_name(link, new TextEncoder().encode("cbx0\\0"));
    const named = readCString(rt().rtnl_link_get_name(link));
    rt().rtnl_link_put(link);
    const native = String(c.close).includes("[native code]") && String(rt().rtnl_link_get_name).includes("[native code]");
    console.log(JSON.stringify({ bad, badErrno, fd, closed, trim, s, types, unnamed, named, native }));
  `;
  const o = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", code],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(o.stderr);
  assertEquals(o.code, 0, err);
  return JSON.parse(new TextDecoder().decode(o.stdout));
}

Deno.test("ffi: a short-lived process gets int and pointer results (signed, NULL) from struct-result bindings", async () => {
  const [short, long] = await Promise.all([probe("short"), probe("long")]);
  // The long-lived process (the daemon) keeps Deno's own bindings (fast calls); the CNI call gets wrappers.
  assert(long.native, JSON.stringify(long));
  assert(!short.native, JSON.stringify(short));
  for (const r of [short, long]) {
    assertEquals(r.types, ["number", "number", "number", "number", "number"], JSON.stringify(r));
    assertEquals(r.bad, -1); // sign-extended, not 0xffffffff
    assertEquals(r.badErrno, 9); // EBADF
    assert(r.fd >= 0 && r.s > r.fd, JSON.stringify(r));
    assertEquals(r.closed, 0);
    assert(r.trim === 0 || r.trim === 1, JSON.stringify(r));
    assertEquals([r.unnamed, r.named], [null, "cbx0"]);
  }
  // Same descriptors in both: the same calls were made.
  assertEquals([short.fd, short.s], [long.fd, long.s]);
});
