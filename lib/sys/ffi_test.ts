import { assert, assertEquals } from "../../tests/assert.ts";
import { errno, libc } from "./ffi.ts";

const bound = (table: object, name: string) =>
  Object.getOwnPropertyDescriptor(table, name)?.get === undefined;

Deno.test("ffi: libc's table binds each symbol on its first use, so a caller pays only for what it calls", () => {
  const c = libc();
  // The table lists every libc call of the product (the UDP data path, ctnetlink, sd_notify's datagram)...
  for (const name of ["open", "setns", "sendto", "recvmmsg", "send", "recv", "__errno_location"]) {
    assert(name in c, name);
  }
  // ...and loading it binds none of them.
  assertEquals(["recvmmsg", "send", "recv", "sendto"].filter((n) => bound(c, n)), []);
  // Except __errno_location: errno() must not bind it after the failing call (binding can change errno).
  assert(bound(c, "__errno_location"), "__errno_location is bound with the table");
  assertEquals(c.close(-1), -1);
  assertEquals(errno(), 9); // EBADF, read through the same table
  assert(bound(c, "close") && bound(c, "__errno_location"));
  assertEquals(["recvmmsg", "send", "recv", "sendto"].filter((n) => bound(c, n)), []);
  assertEquals(libc(), c, "one table per process");
});
