/**
 * HTTP GET of the daemon's health endpoints (/healthz, /readyz, /metrics) as seen from the checked
 * namespace, without curl. In this namespace it is `fetch`. In another (`--netns`) the TCP socket is made
 * with this thread switched into that namespace (`inNetns` around `Deno.connect`: Deno creates the socket
 * when the call starts, so it lives in the namespace for its whole life) and one HTTP/1.0 request is sent
 * on it: 127.0.0.1 there is the daemon's loopback. Hand-written because `fetch` cannot be given a socket;
 * the request is the smallest HTTP there is (GET, `Connection: close`, body up to EOF).
 * @module
 */
import { inNetns } from "../os/mod.ts";

/** An HTTP answer: `status` null when there was none (refused, timed out, unparsable), with the reason. */
export interface HttpAnswer {
  status: number | null;
  body: string;
  /** Why there is no status. */
  error?: string;
}

const MAX_BODY = 1 << 20;

/** GETs `url` from `netns` (null: here), giving up after `timeoutMs`. Never throws. */
export async function httpGet(netns: string | null, url: string, timeoutMs = 3000): Promise<HttpAnswer> {
  try {
    if (netns === null) {
      const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
      return { status: r.status, body: await r.text() };
    }
    return await getInNetns(netns, new URL(url), timeoutMs);
  } catch (e) {
    return { status: null, body: "", error: (e as Error).message };
  }
}

async function getInNetns(netns: string, u: URL, timeoutMs: number): Promise<HttpAnswer> {
  if (u.protocol !== "http:") {
    throw new Error(`${u.protocol} is not supported inside a namespace (use http:)`);
  }
  const host = u.hostname.replace(/^\[|\]$/g, "");
  // A name would be resolved later, on another thread: only an address keeps the socket in the namespace.
  if (!/^[\d.]+$/.test(host) && !host.includes(":")) {
    throw new Error(`inside a namespace the URL must name an IP address, not '${host}'`);
  }
  const port = Number(u.port || 80);
  const pending = inNetns({ name: netns }, () => Deno.connect({ hostname: host, port }));
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  let conn: Deno.Conn | null = null;
  try {
    conn = await Promise.race([pending, timeout]);
    const req = `GET ${u.pathname}${u.search} HTTP/1.0\r\nHost: ${u.host}\r\nConnection: close\r\n\r\n`;
    await Promise.race([conn.write(new TextEncoder().encode(req)), timeout]);
    const chunks: Uint8Array[] = [];
    let size = 0;
    const buf = new Uint8Array(16 * 1024);
    while (size <= MAX_BODY) {
      const n = await Promise.race([conn.read(buf), timeout]);
      if (n === null) break;
      chunks.push(buf.slice(0, n));
      size += n;
    }
    const all = new Uint8Array(size);
    let off = 0;
    for (const c of chunks) all.set(c, off), off += c.length;
    const text = new TextDecoder().decode(all);
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
    if (!m) throw new Error("not an HTTP answer");
    const head = text.indexOf("\r\n\r\n");
    return { status: Number(m[1]), body: head < 0 ? "" : text.slice(head + 4) };
  } finally {
    clearTimeout(timer);
    pending.then((c) => c !== conn && c.close(), () => {});
    try {
      conn?.close();
    } catch { /* already closed */ }
  }
}
