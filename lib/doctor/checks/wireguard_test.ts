import { assertEquals, assertStringIncludes } from "../../../tests/assert.ts";
import { HANDSHAKE_GRACE_S, judgeHandshake } from "./wireguard.ts";
import type { PeerState } from "../../backend/wireguard/uapi.ts";

const P: PeerState = {
  publicKey: btoa("k".repeat(32)),
  presharedKey: false,
  endpoint: "192.0.2.12:51820",
  lastHandshake: 0,
  txBytes: 0,
  rxBytes: 0,
  keepalive: 0,
  allowedIPs: ["10.244.2.0/24"],
};

Deno.test("judgeHandshake: none after 2 minutes of trying is critical; idle or young is not", () => {
  const now = 1_800_000_000;
  assertEquals(judgeHandshake(P, now, 3600).severity, "ok", "idle: nothing sent, nothing to shake hands for");
  assertEquals(judgeHandshake({ ...P, txBytes: 148 }, now, HANDSHAKE_GRACE_S - 1).severity, "ok", "young");
  const c = judgeHandshake({ ...P, txBytes: 148 }, now, HANDSHAKE_GRACE_S);
  assertEquals(c.severity, "critical");
  assertStringIncludes(c.text, "no handshake");
  assertEquals(judgeHandshake({ ...P, keepalive: 25 }, now, 600).severity, "critical", "keepalives try");
  assertEquals(judgeHandshake({ ...P, txBytes: 1 }, now, null).severity, "critical", "age unknown");
  const recent = judgeHandshake({ ...P, lastHandshake: now - 30, txBytes: 1 }, now, 600);
  assertEquals([recent.severity, recent.text], ["ok", "last handshake 30 s ago"]);
  assertEquals(judgeHandshake({ ...P, lastHandshake: now - 900 }, now, 3600).severity, "ok", "idle since");
  assertEquals(
    judgeHandshake({ ...P, lastHandshake: now - 900, keepalive: 25 }, now, 3600).severity,
    "warning",
  );
});
