import { assertEquals, assertThrows } from "../../../tests/assert.ts";
import { ConfigError } from "../../config/netconf.ts";
import { parseUdpOptions } from "../config.ts";

const cfg = (raw: Record<string, unknown>) => ({ type: "udp", raw });

Deno.test("udp options: Port defaults to 8285, must be 1–65535", () => {
  assertEquals(parseUdpOptions(cfg({ Type: "udp" })).port, 8285);
  assertEquals(parseUdpOptions(cfg({ Type: "udp", port: 9000 })).port, 9000);
  for (const bad of [0, -1, 65536, 1.5, "8285"]) {
    const e = assertThrows(() => parseUdpOptions(cfg({ Type: "udp", Port: bad })), ConfigError);
    assertEquals(e.message.includes("Backend.Port must be an integer from 1 to 65535"), true, e.message);
  }
});
