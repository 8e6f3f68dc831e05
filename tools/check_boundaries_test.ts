import { assertEquals } from "../tests/assert.ts";
import { violations } from "./check_boundaries.ts";

const src = [
  "// Deno.dlopen and console.log in a comment do not count",
  'const s = "Deno.dlopen(console.error)";',
  'const lib = Deno.dlopen("libc.so.6", {});',
  "const p = Deno.UnsafePointer.of(new Uint8Array(1));",
  'console.error("x");',
  "Deno.stderr.writeSync(new Uint8Array(0));",
  "const out = Deno.stdout;",
].join("\n");

const whats = (file: string) => violations(file, src).map((v) => `${v.line} ${v.what}`);

Deno.test("boundaries: FFI outside lib/netlink and printing in library code are found, by line", () => {
  assertEquals(whats("lib/daemon/x.ts"), [
    "3 Deno.dlopen",
    "4 Deno.UnsafePointer",
    "5 console.error",
    "6 Deno.stderr",
    "7 Deno.stdout",
  ]);
});

Deno.test("boundaries: lib/netlink may use FFI; the output layers and cli/ may print", () => {
  assertEquals(whats("lib/netlink/ffi.ts"), ["5 console.error", "6 Deno.stderr", "7 Deno.stdout"]);
  assertEquals(whats("lib/daemon/log.ts"), ["3 Deno.dlopen", "4 Deno.UnsafePointer"]);
  assertEquals(whats("lib/warn.ts"), ["3 Deno.dlopen", "4 Deno.UnsafePointer"]);
  assertEquals(whats("lib/ui/table.ts"), ["3 Deno.dlopen", "4 Deno.UnsafePointer"]);
  assertEquals(whats("cli/lease.ts"), ["3 Deno.dlopen", "4 Deno.UnsafePointer"]);
  assertEquals(whats("lib/uix.ts").length, 5, "lib/ui/ is a directory, not a prefix of names");
});

Deno.test("boundaries: lib/netlink is reached through its mod.ts; import type of its types.ts aside", () => {
  const imports = [
    'import { openNetlink } from "../netlink/mod.ts";',
    'import type { LinkInfo } from "../netlink/types.ts";',
    'import { type RouteInfo } from "../netlink/types.ts";',
    'import { nftLibrary } from "../netlink/nftables.ts";',
    'import type { NftRunOptions } from "../netlink/nftables.ts";',
    'const { deleteConntrack } = await import("../netlink/conntrack.ts");',
    'export { getTxChecksum } from "../netlink/ethtool.ts";',
    'import { LIB } from "../netlink_like/x.ts";',
  ].join("\n");
  const found = (file: string) => violations(file, imports).map((v) => `${v.line} ${v.what}`);
  assertEquals(found("lib/doctor/x.ts"), [
    "4 import from ../netlink/nftables.ts",
    "5 import from ../netlink/nftables.ts",
    "6 import(../netlink/conntrack.ts)",
    "7 export from ../netlink/ethtool.ts",
  ]);
  assertEquals(found("lib/netlink/handle.ts"), [], "inside lib/netlink every module is reachable");
  assertEquals(violations("mod.ts", 'export { x } from "./lib/netlink/ethtool.ts";').length, 1);
});
