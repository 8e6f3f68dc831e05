/** A generated HTTP body for hostile-server tests (etcd, kube-apiserver fakes): large, never held in memory. */

const MiB = 1024 * 1024;

/** A body of `total` bytes: `head`, then `unit` repeated, then `tail` (generated as read, never held). */
export function streamed(
  head: string,
  unit: string,
  tail: string,
  total: number,
): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  const block = enc.encode(unit.repeat(Math.max(1, Math.floor(MiB / unit.length))));
  let sent = 0, stage = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (stage === 0) {
        c.enqueue(enc.encode(head));
        stage = 1;
      } else if (stage === 1) {
        c.enqueue(block);
        sent += block.length;
        if (sent >= total) stage = 2;
      } else {
        c.enqueue(enc.encode(tail));
        c.close();
      }
    },
  });
}
