import { assertEquals, assertThrows } from "../../../tests/assert.ts";
import { ConfigError } from "../../config/netconf.ts";
import { commandTimeoutMs, MAX_COMMAND_CHARS, parseExtensionOptions } from "./options.ts";

const b = (raw: Record<string, unknown>) => ({ type: "extension", raw: { Type: "extension", ...raw } });

Deno.test("extension options: flanneld's four keys, matched case-insensitively; empty or null: not set", () => {
  assertEquals(
    parseExtensionOptions(b({
      PreStartupCommand: "/bin/pre",
      postStartupCommand: "/bin/post $SUBNET",
      SUBNETADDCOMMAND: "/bin/add",
      SubnetRemoveCommand: "",
      Other: 1,
    })),
    { PreStartupCommand: "/bin/pre", PostStartupCommand: "/bin/post $SUBNET", SubnetAddCommand: "/bin/add" },
  );
  assertEquals(parseExtensionOptions(b({ SubnetAddCommand: null })), {});
});

Deno.test("extension options: refused before anything runs (type, size, NUL, white space only)", () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ SubnetAddCommand: 3 }, "Backend.SubnetAddCommand must be a string, got 3"],
    [{ PreStartupCommand: "x".repeat(MAX_COMMAND_CHARS + 1) }, "at most 4096"],
    [{ PostStartupCommand: "/bin/a\0b" }, "NUL"],
    [{ SubnetRemoveCommand: " \t " }, "only white space"],
    [{ SubnetAddCommand: Array(200).fill("a").join(" ") }, "200 arguments: at most 128"],
  ];
  for (const [raw, msg] of cases) assertThrows(() => parseExtensionOptions(b(raw)), ConfigError, msg);
});

Deno.test("extension options: the timeout variable takes whole seconds from 1 to 3600", () => {
  assertEquals(commandTimeoutMs(undefined, 60_000), 60_000);
  assertEquals(commandTimeoutMs("5", 60_000), 5_000);
  for (const v of ["0", "3601", "1.5", "-1", "5s"]) assertThrows(() => commandTimeoutMs(v, 1), ConfigError);
});
