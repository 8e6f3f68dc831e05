import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { NetlinkError } from "../os/mod.ts";
import { sockaddrUn } from "../sys/unix_dgram.ts";
import { sdNotify } from "./sdnotify.ts";

Deno.test("sdnotify: sockaddr_un for paths and abstract names", () => {
  const p = sockaddrUn("/run/x");
  assertEquals(p.len, 2 + 6 + 1);
  assertEquals([p.buf[0], p.buf[1], p.buf[2]], [1, 0, "/".charCodeAt(0)]);
  const a = sockaddrUn("@abc");
  assertEquals(a.len, 2 + 4);
  assertEquals(a.buf[2], 0);
  assertEquals(sdNotify("READY=1", undefined), false);
});

Deno.test("sdnotify: a socket that is not there, or a name too long, is a NetlinkError with the errno", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const e = assertThrows(() => sdNotify("READY=1", `${dir}/absent.sock`), NetlinkError) as NetlinkError;
    assertEquals(e.errno, 2); // ENOENT
    const long = assertThrows(() => sdNotify("READY=1", `/${"x".repeat(200)}`), NetlinkError) as NetlinkError;
    assertEquals(long.errno, 22); // EINVAL
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sdnotify: READY=1 reaches a unix datagram socket, by path and abstract name (python3 receives)", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/notify.sock`;
  const abstract = `@flanctl-test-${crypto.randomUUID().slice(0, 8)}`;
  // A receiver outside Deno: stable Deno has no unix datagram sockets (see sdnotify.ts).
  const py = new Deno.Command("python3", {
    args: [
      "-c",
      "import socket,sys\ns=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)\ns.bind(sys.argv[1])\n" +
      "a=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)\na.bind('\\0'+sys.argv[2][1:])\n" +
      "print('bound',flush=True)\ns.settimeout(10)\na.settimeout(10)\n" +
      "print(s.recv(256).decode(),flush=True)\nprint(a.recv(256).decode(),flush=True)",
      path,
      abstract,
    ],
    stdout: "piped",
  }).spawn();
  try {
    const reader = py.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    while (!out.includes("bound")) out += (await reader.read()).value ?? "";
    assertEquals(sdNotify("READY=1\nSTATUS=test", path), true);
    assertEquals(sdNotify("STOPPING=1", abstract), true);
    while (!out.includes("STOPPING=1")) {
      const { value, done } = await reader.read();
      if (done) break;
      out += value;
    }
    assertEquals(out.split("\n").slice(1, 4), ["READY=1", "STATUS=test", "STOPPING=1"]);
    reader.releaseLock();
  } finally {
    await py.status;
    await Deno.remove(dir, { recursive: true });
  }
});
