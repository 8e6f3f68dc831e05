/**
 * A TCP proxy that counts bytes each way (for bench/kube_apiserver_bench.ts: what one client sends to and
 * receives from the API server, TLS included). Listens on `listen` (host:port), forwards to `target`, and
 * rewrites `stats` (JSON `{up, down, conns}`) every 100 ms while the counts change. Runs until killed.
 *
 *   deno run -A bench/tcp_count_proxy.ts <listen host:port> <target host:port> <stats file>
 * @module
 */
const [listen, target, stats] = Deno.args;
const hp = (s: string) => ({
  hostname: s.slice(0, s.lastIndexOf(":")),
  port: Number(s.slice(s.lastIndexOf(":") + 1)),
});
const c = { up: 0, down: 0, conns: 0 };
let dirty = true;
setInterval(() => {
  if (!dirty) return;
  dirty = false;
  Deno.writeTextFileSync(`${stats}.tmp`, JSON.stringify(c));
  Deno.renameSync(`${stats}.tmp`, stats);
}, 100);

async function pump(from: Deno.Conn, to: Deno.Conn, k: "up" | "down"): Promise<void> {
  const buf = new Uint8Array(64 * 1024);
  try {
    for (;;) {
      const n = await from.read(buf);
      if (n === null) break;
      c[k] += n;
      dirty = true;
      let off = 0;
      while (off < n) off += await to.write(buf.subarray(off, n));
    }
  } catch { /* reset */ }
  try {
    to.close();
  } catch { /* closed */ }
  try {
    from.close();
  } catch { /* closed */ }
}

for await (const conn of Deno.listen(hp(listen))) {
  c.conns++;
  dirty = true;
  Deno.connect(hp(target)).then(
    (up) => {
      pump(conn, up, "up");
      pump(up, conn, "down");
    },
    () => conn.close(),
  );
}
