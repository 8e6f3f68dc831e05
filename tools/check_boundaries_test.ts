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

Deno.test("boundaries: FFI outside lib/sys and lib/netlink and printing in library code are found, by line", () => {
  assertEquals(whats("lib/daemon/x.ts"), [
    "3 Deno.dlopen",
    "4 Deno.UnsafePointer",
    "5 console.error",
    "6 Deno.stderr",
    "7 Deno.stdout",
  ]);
});

Deno.test("boundaries: lib/sys, lib/netlink and the udp worker may use FFI; the output layers and cli/ may print", () => {
  assertEquals(whats("lib/sys/ffi.ts"), ["5 console.error", "6 Deno.stderr", "7 Deno.stdout"]);
  assertEquals(whats("lib/netlink/io.ts"), ["5 console.error", "6 Deno.stderr", "7 Deno.stdout"]);
  assertEquals(whats("lib/backend/udp/worker/rx.ts"), ["5 console.error", "6 Deno.stderr", "7 Deno.stdout"]);
  assertEquals(
    whats("lib/backend/udp/udp_dataplane.ts").length,
    5,
    "only the workers, not the rest of the backend",
  );
  assertEquals(whats("lib/base/log.ts"), ["3 Deno.dlopen", "4 Deno.UnsafePointer"]);
  assertEquals(whats("lib/base/warn.ts"), ["3 Deno.dlopen", "4 Deno.UnsafePointer"]);
  assertEquals(whats("lib/base/ui/table.ts"), ["3 Deno.dlopen", "4 Deno.UnsafePointer"]);
  assertEquals(whats("cli/lease.ts"), ["3 Deno.dlopen", "4 Deno.UnsafePointer"]);
  assertEquals(whats("lib/base/uix.ts").length, 5, "lib/base/ui/ is a directory, not a prefix of names");
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
  assertEquals(violations("mod.ts", 'export { x } from "./lib/sys/ethtool.ts";').length, 1);
});

Deno.test("boundaries: lib/sys is imported by lib/netlink, lib/os and lib/backend/udp only", () => {
  const imports = 'import { libc } from "../sys/ffi.ts";\nimport { inNetns } from "../../sys/netns.ts";';
  const found = (file: string) => violations(file, imports).map((v) => `${v.line} ${v.rule.split(" ")[0]}`);
  assertEquals(found("lib/doctor/x.ts"), ["1 lib/sys"]);
  assertEquals(found("lib/doctor/checks/x.ts"), ["2 lib/sys"]);
  assertEquals(found("lib/netlink/x.ts"), []);
  assertEquals(found("lib/os/mod.ts"), []);
  assertEquals(found("lib/backend/udp/x.ts"), []);
  assertEquals(found("lib/backend/vxlan.ts"), ["1 lib/sys"]);
  assertEquals(found("lib/osx/mod.ts"), ["1 lib/sys"], "lib/os/ is a directory, not a prefix of names");
});

Deno.test("boundaries: the other OS calls come through lib/os/mod.ts, which holds no FFI", () => {
  const imports = [
    'import { sendUnixDatagram } from "../os/mod.ts";',
    'import { sendUnixDatagram as s } from "../sys/unix_dgram.ts";',
    'const { inNetns } = await import("../sys/netns.ts");',
  ].join("\n");
  const found = (file: string) => violations(file, imports).map((v) => `${v.line} ${v.what}`);
  assertEquals(found("lib/daemon/sdnotify.ts"), [
    "2 import from ../sys/unix_dgram.ts",
    "3 import(../sys/netns.ts)",
  ]);
  assertEquals(found("lib/os/mod.ts"), []);
  assertEquals(whats("lib/os/mod.ts").slice(0, 2), ["3 Deno.dlopen", "4 Deno.UnsafePointer"]);
});

Deno.test("boundaries: no product module imports the fake handle of lib/netlink/fake", () => {
  const imports = [
    'import { FakeNetlink } from "../netlink/fake/fake_netlink.ts";',
    'const { FakeNetlink: F } = await import("./fake/fake_netlink.ts");',
    'import { openNetlink } from "../netlink/mod.ts";',
  ].join("\n");
  const found = (file: string) => violations(file, imports).map((v) => `${v.line} ${v.rule.split(" ")[0]}`);
  assertEquals(found("lib/reconcile/reconciler.ts"), ["1 lib/netlink/fake", "2 lib/reconcile/fake"]);
  assertEquals(
    found("lib/netlink/handle.ts"),
    ["1 lib/netlink/fake", "2 lib/netlink/fake"],
    "nor inside lib/netlink",
  );
  assertEquals(found("lib/netlink/fake/more.ts"), [], "the fake's own modules");
  assertEquals(violations("lib/netlink/fake/x.ts", 'import { NLE } from "../../sys/errors.ts";'), []);
});

Deno.test("boundaries: no product module imports fast-check (the property tests' library)", () => {
  const imports = [
    'import fc from "fast-check";',
    'const fc2 = await import("npm:fast-check@4.11.0");',
    'import { parse } from "yaml";',
  ].join("\n");
  const found = (file: string) => violations(file, imports).map((v) => `${v.line} ${v.rule.split(" ")[0]}`);
  assertEquals(found("lib/lease/wire.ts"), ["1 fast-check", "2 fast-check"]);
  assertEquals(found("cli/main.ts"), ["1 fast-check", "2 fast-check"]);
});

Deno.test("boundaries: nothing outside lib/doctor imports lib/doctor/checks", () => {
  const imports = [
    'import { udpDevice } from "../doctor/checks/udp.ts";',
    'import { udpDevice as u } from "../doctor/mod.ts";',
    'import { UDP_DEVICE } from "../observe/probes.ts";',
    'const m = await import("../doctor/checks/ipv6.ts");',
  ].join("\n");
  const found = (file: string) => violations(file, imports).map((v) => `${v.line} ${v.what}`);
  assertEquals(found("lib/trace/x.ts"), [
    "1 import from ../doctor/checks/udp.ts",
    "4 import(../doctor/checks/ipv6.ts)",
  ]);
  assertEquals(found("lib/status/x.ts").length, 2);
  assertEquals(found("lib/doctor/mod.ts"), [], "inside lib/doctor the checks are reachable");
  assertEquals(violations("lib/doctor/checks/vxlan.ts", 'import { x } from "./udp.ts";'), []);
});

Deno.test("boundaries: every lib/<area>/fake folder is for unit tests, lib/observe/fake too", () => {
  const imp = 'import { offlineSnapshot } from "../observe/fake/offline_snapshot.ts";';
  assertEquals(violations("lib/status/status.ts", imp).map((v) => v.rule), [
    "lib/observe/fake is for unit tests: product code never imports it",
  ]);
  assertEquals(violations("lib/observe/fake/other.ts", 'import { x } from "./offline_snapshot.ts";'), []);
});
