/**
 * A fake etcd v3 JSON gateway for tests of the etcd client and store against hostile answers
 * (lib/store/etcd/etcd_hostile_test.ts, tests/etcd_hostile_test.ts): Deno.serve on loopback, no etcd.
 * @module
 */

/** A fake etcd gateway answering each path with `handler`; counts requests by path. */
export function fakeEtcd(handler: (path: string, body: Record<string, unknown>) => Response) {
  const counts = new Map<string, number>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const path = new URL(req.url).pathname;
    counts.set(path, (counts.get(path) ?? 0) + 1);
    const body = await req.json().catch(() => ({}));
    return handler(path, body);
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, counts, close: () => server.shutdown() };
}
