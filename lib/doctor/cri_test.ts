import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CriError, decodeListPodSandboxResponse, grpcFrame, grpcUnframe } from "./cri.ts";

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
