/**
 * The smallest CRI client doctor needs: `RuntimeService/ListPodSandbox` over gRPC on the runtime's unix
 * socket (containerd, CRI-O), so leaks can be judged against the sandboxes the runtime really has.
 *
 * gRPC is HTTP/2 with length-prefixed protobuf messages: node:http2 (a Deno built-in) carries it over the
 * socket (createConnection → node:net), and the two messages are encoded/decoded here by hand (a dozen
 * lines of protobuf wire format) instead of pulling @grpc/grpc-js and a protobuf runtime into every
 * doctor run: no package, no lock entry, nothing generated. `runtime.v1` first, `runtime.v1alpha2` (the
 * same message layout) for runtimes that only speak that. Everything the runtime sends is bounded: the
 * response size, the number of sandboxes, the string lengths.
 * @module
 */
import * as http2 from "node:http2";
import * as net from "node:net";
import { Buffer } from "node:buffer";

/** One sandbox as the runtime reports it. */
export interface CriSandbox {
  id: string;
  name: string;
  namespace: string;
  uid: string;
  /** SANDBOX_READY (its network is set up) or SANDBOX_NOTREADY (stopped, or its setup failed). */
  state: "ready" | "notready";
}

/** A CRI call that failed: not reachable, not a CRI runtime, a gRPC error, or a malformed answer. */
export class CriError extends Error {
  constructor(message: string, readonly grpcStatus: number | null = null) {
    super(message);
    this.name = "CriError";
  }
}

/** The largest ListPodSandbox answer read (a node's few hundred sandboxes take a few hundred KiB). */
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
/** The most sandboxes taken from one answer. */
export const MAX_SANDBOXES = 100_000;

/** Sockets where the common runtimes listen by default. */
export const DEFAULT_CRI_SOCKETS = [
  "/run/containerd/containerd.sock",
  "/run/crio/crio.sock",
  "/var/run/crio/crio.sock",
];

/** The first of `candidates` that is a unix socket, or null. */
export function findCriSocket(candidates: string[] = DEFAULT_CRI_SOCKETS): string | null {
  for (const p of candidates) {
    try {
      if (Deno.statSync(p).isSocket) return p;
    } catch { /* next */ }
  }
  return null;
}

// --- protobuf wire format (only what the two messages need) ---

class Reader {
  pos = 0;
  constructor(readonly b: Uint8Array) {}
  get done(): boolean {
    return this.pos >= this.b.length;
  }
  varint(): number {
    let out = 0, mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.b.length) throw new CriError("truncated protobuf varint");
      const x = this.b[this.pos++];
      out += (x & 0x7f) * mul;
      if (!(x & 0x80)) return out;
      mul *= 128;
    }
    throw new CriError("protobuf varint too long");
  }
  bytes(): Uint8Array {
    const n = this.varint();
    if (n > this.b.length - this.pos) throw new CriError("truncated protobuf field");
    const out = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.bytes();
    else if (wire === 5) this.pos += 4;
    else throw new CriError(`unsupported protobuf wire type ${wire}`);
    if (this.pos > this.b.length) throw new CriError("truncated protobuf field");
  }
}

const dec = new TextDecoder();
const MAX_STR = 4096;

function str(b: Uint8Array): string {
  return dec.decode(b.length > MAX_STR ? b.subarray(0, MAX_STR) : b);
}

function decodeMetadata(b: Uint8Array, s: CriSandbox): void {
  const r = new Reader(b);
  while (!r.done) {
    const key = r.varint(), field = Math.floor(key / 8), wire = key & 7;
    if (wire === 2 && field === 1) s.name = str(r.bytes());
    else if (wire === 2 && field === 2) s.uid = str(r.bytes());
    else if (wire === 2 && field === 3) s.namespace = str(r.bytes());
    else r.skip(wire);
  }
}

function decodeSandbox(b: Uint8Array): CriSandbox {
  const s: CriSandbox = { id: "", name: "", namespace: "", uid: "", state: "ready" };
  const r = new Reader(b);
  while (!r.done) {
    const key = r.varint(), field = Math.floor(key / 8), wire = key & 7;
    if (wire === 2 && field === 1) s.id = str(r.bytes());
    else if (wire === 2 && field === 2) decodeMetadata(r.bytes(), s);
    else if (wire === 0 && field === 3) s.state = r.varint() === 0 ? "ready" : "notready";
    else r.skip(wire);
  }
  return s;
}

/** Decodes a ListPodSandboxResponse (field 1: repeated PodSandbox). */
export function decodeListPodSandboxResponse(b: Uint8Array): CriSandbox[] {
  const out: CriSandbox[] = [];
  const r = new Reader(b);
  while (!r.done) {
    const key = r.varint(), field = Math.floor(key / 8), wire = key & 7;
    if (wire === 2 && field === 1) {
      if (out.length >= MAX_SANDBOXES) throw new CriError(`more than ${MAX_SANDBOXES} sandboxes`);
      const s = decodeSandbox(r.bytes());
      if (s.id) out.push(s);
    } else r.skip(wire);
  }
  return out;
}

/** One gRPC message frame: uncompressed flag, 4-byte big-endian length, message. */
export function grpcFrame(msg: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + msg.length);
  new DataView(out.buffer).setUint32(1, msg.length);
  out.set(msg, 5);
  return out;
}

/** The message of a unary gRPC answer's body (exactly one uncompressed frame). */
export function grpcUnframe(body: Uint8Array): Uint8Array {
  if (body.length < 5) throw new CriError("gRPC answer without a message");
  if (body[0] !== 0) throw new CriError("compressed gRPC answer (not requested)");
  const n = new DataView(body.buffer, body.byteOffset).getUint32(1);
  if (n > body.length - 5) throw new CriError("truncated gRPC message");
  return body.subarray(5, 5 + n);
}

/** One unary call on `socket`: the answer's message, or a CriError (grpc-status, transport). */
async function unary(socket: string, path: string, msg: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
  const client = http2.connect("http://localhost", { createConnection: () => net.connect(socket) });
  try {
    return await new Promise<Uint8Array>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new CriError(`no answer from ${socket} in ${timeoutMs} ms`)),
        timeoutMs,
      );
      const done = (f: () => void) => {
        clearTimeout(timer);
        f();
      };
      client.on("error", (e: Error) => done(() => reject(new CriError(`${socket}: ${e.message}`))));
      const req = client.request({
        ":method": "POST",
        ":path": path,
        "content-type": "application/grpc",
        te: "trailers",
      });
      const chunks: Uint8Array[] = [];
      let size = 0;
      let status: number | null = null, message = "";
      const grpcHeaders = (h: Record<string, unknown>) => {
        if (h["grpc-status"] !== undefined) status = Number(h["grpc-status"]);
        if (typeof h["grpc-message"] === "string") {
          message = decodeURIComponent(h["grpc-message"]).slice(0, 300);
        }
      };
      req.on("response", (h: Record<string, unknown>) => {
        const http = Number(h[":status"]);
        if (http !== 200) done(() => reject(new CriError(`${socket}: HTTP ${http}: not a gRPC server`)));
        grpcHeaders(h);
      });
      req.on("trailers", grpcHeaders);
      req.on("data", (c: Uint8Array) => {
        size += c.length;
        if (size > MAX_RESPONSE_BYTES) {
          req.close();
          done(() => reject(new CriError(`answer larger than ${MAX_RESPONSE_BYTES} bytes`)));
          return;
        }
        chunks.push(new Uint8Array(c));
      });
      req.on("error", (e: Error) => done(() => reject(new CriError(`${socket}: ${e.message}`))));
      req.on("end", () =>
        done(() => {
          if (status !== 0) {
            reject(
              new CriError(
                `${path}: gRPC status ${status ?? "missing"}${message ? `: ${message}` : ""}`,
                status,
              ),
            );
            return;
          }
          const body = new Uint8Array(size);
          let off = 0;
          for (const c of chunks) body.set(c, (off += c.length) - c.length);
          try {
            resolve(grpcUnframe(body));
          } catch (e) {
            reject(e);
          }
        }));
      req.end(Buffer.from(grpcFrame(msg)));
    });
  } finally {
    client.close();
    client.destroy();
  }
}

/**
 * The runtime's sandboxes (ListPodSandbox without a filter): runtime.v1, else v1alpha2 when the runtime
 * answers UNIMPLEMENTED (12).
 */
export async function listPodSandboxes(socket: string, timeoutMs = 5000): Promise<CriSandbox[]> {
  const empty = new Uint8Array(0);
  let msg: Uint8Array;
  try {
    msg = await unary(socket, "/runtime.v1.RuntimeService/ListPodSandbox", empty, timeoutMs);
  } catch (e) {
    if (!(e instanceof CriError) || e.grpcStatus !== 12) throw e;
    msg = await unary(socket, "/runtime.v1alpha2.RuntimeService/ListPodSandbox", empty, timeoutMs);
  }
  return decodeListPodSandboxResponse(msg);
}
