import { assert, assertEquals, assertThrows } from "../../tests/assert.ts";
import {
  daemonRunning,
  DaemonStateError,
  daemonStatePath,
  ownDaemonState,
  readDaemonState,
  removeDaemonState,
  writeDaemonState,
} from "./daemon_state.ts";

Deno.test("daemon state: path next to subnet.env, round trip, pid reuse and dead pids are not running", () => {
  assertEquals(daemonStatePath("/run/flannel/subnet.env"), "/run/flannel/flanctl.json");
  assertEquals(daemonStatePath("subnet.env"), "./flanctl.json");
  const dir = Deno.makeTempDirSync();
  try {
    const p = `${dir}/flanctl.json`;
    assertEquals(readDaemonState(p), null);
    const own = ownDaemonState("9.9.9", "127.0.0.1:1234", `${dir}/subnet.env`);
    writeDaemonState(p, own);
    const back = readDaemonState(p)!;
    assertEquals(back, own);
    assert(daemonRunning(back), "this process is running");
    assert(
      daemonRunning({ ...back, procStart: (back.procStart ?? 0) + 1 }) === false,
      "pid reused by another process",
    );
    assert(daemonRunning({ ...back, pid: 999_999_999 }) === false, "no such pid");
    assertEquals(daemonRunning({ ...back, pidNs: "pid:[1]" }), null, "another pid namespace: unknown");
    removeDaemonState(p, own.pid + 1); // not ours: kept
    assert(readDaemonState(p) !== null);
    removeDaemonState(p, own.pid);
    assertEquals(readDaemonState(p), null);
    Deno.writeTextFileSync(p, "{");
    assertThrows(() => readDaemonState(p), DaemonStateError, "not JSON");
    Deno.writeTextFileSync(p, `{"pid":-1}`);
    assertThrows(() => readDaemonState(p), DaemonStateError, "field pid");
    // The daemon writes it as a file: a symlink, even to a valid state file next to it, is refused.
    writeDaemonState(`${dir}/real.json`, own);
    Deno.removeSync(p);
    Deno.symlinkSync(`${dir}/real.json`, p);
    assertThrows(() => readDaemonState(p), DaemonStateError, "is a symlink, refused");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
