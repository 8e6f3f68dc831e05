import { assert, assertEquals, assertThrows } from "../../tests/assert.ts";
import {
  CriError,
  decodeListPodSandboxResponse,
  findCriSocket,
  grpcFrame,
  grpcUnframe,
  listPodSandboxes,
} from "./cri.ts";

/** Protobuf: a length-delimited field. */
function ld(field: number, body: Uint8Array | string): Uint8Array {
  const b = typeof body === "string" ? new TextEncoder().encode(body) : body;
  return new Uint8Array([(field << 3) | 2, b.length, ...b]);
}
const cat = (...xs: Uint8Array[]) => new Uint8Array(xs.flatMap((x) => [...x]));

Deno.test("cri: ListPodSandboxResponse decoded from the wire, unknown fields skipped", () => {
  const meta = cat(ld(1, "web"), ld(2, "uid-1"), ld(3, "default"), new Uint8Array([4 << 3, 2]));
  const ready = cat(ld(1, "aaa"), ld(2, meta), new Uint8Array([4 << 3, 0x90, 0x4e]), ld(7, "runc"));
  const notready = cat(ld(1, "bbb"), new Uint8Array([3 << 3, 1]), ld(9, "future field"));
  const msg = cat(ld(1, ready), ld(1, notready), new Uint8Array([2 << 3, 7]));
  assertEquals(decodeListPodSandboxResponse(msg), [
    { id: "aaa", name: "web", namespace: "default", uid: "uid-1", state: "ready" },
    { id: "bbb", name: "", namespace: "", uid: "", state: "notready" },
  ]);
  assertEquals(decodeListPodSandboxResponse(new Uint8Array(0)), []);
  assertThrows(() => decodeListPodSandboxResponse(new Uint8Array([10, 50, 1])), CriError, "truncated");
  assertThrows(() => decodeListPodSandboxResponse(new Uint8Array([0x80, 0x80])), CriError, "truncated");
});

Deno.test("cri: gRPC frames", () => {
  const f = grpcFrame(new Uint8Array([1, 2, 3]));
  assertEquals([...f], [0, 0, 0, 0, 3, 1, 2, 3]);
  assertEquals([...grpcUnframe(f)], [1, 2, 3]);
  assertThrows(() => grpcUnframe(new Uint8Array([1, 0, 0, 0, 0])), CriError, "compressed");
  assertThrows(() => grpcUnframe(new Uint8Array([0, 0, 0, 0, 9, 1])), CriError, "truncated");
});

Deno.test("cri: a socket that is not there is a CriError naming it, quickly", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "flanctl-cri-" });
  try {
    const t0 = performance.now();
    const err = await listPodSandboxes(`${dir}/none.sock`, 2000).then(() => null, (e) => e);
    assert(err instanceof CriError, String(err));
    assert(err.message.includes(`${dir}/none.sock`), err.message);
    assert(performance.now() - t0 < 2000, "no wait for the timeout");
    // A plain file is not a socket: not found among the defaults.
    Deno.writeTextFileSync(`${dir}/file.sock`, "");
    assertEquals(findCriSocket([`${dir}/file.sock`, `${dir}/none.sock`]), null);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
