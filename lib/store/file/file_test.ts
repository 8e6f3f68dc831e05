/**
 * File store: lease life cycle, watch events (including expiry), and many processes acquiring at once.
 * Everything lives in a temp directory; nothing touches the network.
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../../../tests/assert.ts";
import { FileStore } from "./file.ts";
import { IPNet } from "../../base/cidr.ts";
import type { LeaseEvent } from "../types.ts";
import { LeaseNotFoundError, NoNetworkConfigError, StoreDirNotFoundError } from "../errors.ts";
import { encodeLeaseFile, FileStoreReader } from "./file_reader.ts";
import { OutOfSubnetsError } from "../../lease/allocator.ts";
import { acquireInProcesses, NET50, nextEvents } from "../../../tests/store_helpers.ts";

async function withDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-store-" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const attrs = (ip: string) => ({
  PublicIP: ip,
  PublicIPv6: null,
  BackendType: "vxlan",
  BackendData: { VNI: 1, VtepMAC: "aa:bb:cc:dd:ee:01" },
});

Deno.test("file store: acquire, re-acquire by PublicIP, previous subnet, renew, revoke", async () => {
  await withDir(async (dir) => {
    const s = new FileStore({ dir });
    await assertRejects(() => s.acquireLease(attrs("192.0.2.1")), Error, "flanctl lease config set");
    await s.setNetworkConfig(NET50);
    const a = await s.acquireLease(attrs("192.0.2.1"));
    assert(a.subnet && a.subnet.prefix === 24, "got a /24");
    const file = JSON.parse(await Deno.readTextFile(`${dir}/subnets/${a.subnet.toKey()}`));
    assertEquals(Object.keys(file.lease), ["PublicIP", "PublicIPv6", "BackendType", "BackendData"]);
    const again = await s.acquireLease(attrs("192.0.2.1"));
    assertEquals(again.subnet!.toString(), a.subnet.toString());
    // The previous subnet must be free: `a` was drawn at random and may hold 10.5.33.0/24 (1 in 50).
    const prev = IPNet.parse(["10.5.33.0/24", "10.5.34.0/24"].find((x) => x !== String(a.subnet))!);
    const b = await s.acquireLease(attrs("192.0.2.2"), { previousSubnet: prev });
    assertEquals(b.subnet!.toString(), prev.toString());
    // taken previous subnet → another one
    const c = await s.acquireLease(attrs("192.0.2.3"), { previousSubnet: prev });
    assert(c.subnet!.toString() !== prev.toString());
    await new Promise((r) => setTimeout(r, 5));
    const r = await s.renewLease(b);
    assert(r.expiration!.getTime() > b.expiration!.getTime(), "renewal extends expiry");
    await s.revokeLease(b.subnet!);
    await assertRejects(() => s.renewLease(b), LeaseNotFoundError);
    const { leases } = await s.listLeases();
    assertEquals(
      leases.map((l) => l.subnet!.toString()).sort(),
      [a.subnet.toString(), c.subnet!.toString()].sort(),
    );
    await s.close();
  });
});

Deno.test("file store: a reservation is used by its owner and becomes a 24 h lease, as flanneld", async () => {
  await withDir(async (dir) => {
    const s = new FileStore({ dir });
    await s.setNetworkConfig(NET50);
    await s.reserve(IPNet.parse("10.5.7.0/24"), "192.0.2.7");
    assertEquals((await s.listLeases()).leases[0].expiration, null);
    const l = await s.acquireLease(attrs("192.0.2.7"));
    assertEquals(l.subnet!.toString(), "10.5.7.0/24");
    const left = l.expiration!.getTime() - Date.now();
    assertEquals(left > 86_000_000 && left <= 86_400_000, true, `24 h lease: ${left} ms`);
    assertEquals((await s.listLeases()).leases[0].expiration?.getTime(), l.expiration!.getTime());
    await assertRejects(() => s.reserve(IPNet.parse("10.5.7.0/24"), "192.0.2.8"), Error, "revoke it first");
  });
});

Deno.test("file store: malformed lease file is skipped with a warning", async () => {
  await withDir(async (dir) => {
    // The warnings go to the store's warn callback (the daemon passes its Logger), never to the console.
    const warnings: string[] = [];
    const s = new FileStore({ dir, warn: (m) => warnings.push(m) });
    await s.setNetworkConfig(NET50);
    await Deno.writeTextFile(`${dir}/subnets/10.5.9.0-24`, "{not json");
    await Deno.writeTextFile(`${dir}/subnets/bogus`, "{}");
    const printed = await capturingStderr(async () => {
      await s.acquireLease(attrs("192.0.2.1"));
      const { leases } = await s.listLeases();
      assertEquals(leases.length, 1);
      await s.listLeases(); // a second listing does not repeat the warnings
    });
    assertEquals(printed, []);
    assertEquals(warnings.length, 2, warnings.join("\n"));
    assertStringIncludes(warnings.join("\n"), "skipping");
    assert(warnings.some((w) => w.includes("malformed lease 10.5.9.0-24")), warnings.join("\n"));
    assert(warnings.some((w) => w.includes("malformed lease bogus") && w.includes("not a subnet key")));
  });
});

/**
 * Runs `fn` with everything it writes to stderr captured — console.error and Deno.stderr's writes (how
 * lib/base/warn.ts prints) — and returns what was written.
 */
async function capturingStderr(fn: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const dec = new TextDecoder();
  const err = Deno.stderr as { writeSync(p: Uint8Array): number; write(p: Uint8Array): Promise<number> };
  const orig = { error: console.error, writeSync: err.writeSync, write: err.write };
  console.error = (...a: unknown[]) => lines.push(a.map(String).join(" "));
  err.writeSync = (p) => (lines.push(dec.decode(p)), p.length);
  err.write = (p) => Promise.resolve(err.writeSync(p));
  try {
    await fn();
  } finally {
    console.error = orig.error;
    err.writeSync = orig.writeSync;
    err.write = orig.write;
  }
  return lines;
}

/** Every path below `dir` with its size and mtime: equal before and after means nothing was written. */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of Deno.readDirSync(d)) {
      const p = `${d}/${e.name}`;
      const st = Deno.statSync(p);
      out.push(`${p} ${st.size} ${st.mtime?.getTime()}`);
      if (e.isDirectory) walk(p);
    }
  };
  walk(dir);
  return out.sort();
}

Deno.test("file store: reading never writes; a missing directory is an error naming it", async () => {
  await withDir(async (parent) => {
    const dir = `${parent}/typo`;
    const s = new FileStore({ dir });
    assertEquals([...Deno.readDirSync(parent)], [], "the constructor creates nothing");
    const err = await assertRejects(() => s.listLeases(), StoreDirNotFoundError);
    assertStringIncludes(err.message, dir);
    assertEquals((err as StoreDirNotFoundError).exitCode, 1);
    await assertRejects(() => s.getNetworkConfig(), NoNetworkConfigError, `${dir} (no such directory)`);
    await assertRejects(() => new FileStoreReader(dir).listLeases(), StoreDirNotFoundError, dir);
    await assertRejects(() => s.renewLease({ ...lease10(), expiration: null }), StoreDirNotFoundError);
    assertEquals([...Deno.readDirSync(parent)], [], "readers and a failed writer left nothing behind");
    // Writing the config is what creates a store.
    await s.setNetworkConfig(NET50);
    assert(Deno.statSync(`${dir}/subnets`).isDirectory);
  });
});

Deno.test("file store: listing leaves expired leases in place; a writer collects them", async () => {
  await withDir(async (dir) => {
    const shortLived = new FileStore({ dir, ttlMs: 200 });
    await shortLived.setNetworkConfig(NET50);
    const gone = await shortLived.acquireLease(attrs("192.0.2.1"));
    await new Promise((r) => setTimeout(r, 300));
    const before = tree(dir);
    const reader = new FileStore({ dir });
    assertEquals((await reader.listLeases()).leases, [], "an expired lease is not listed");
    const all = await new FileStoreReader(dir).listLeases();
    assertEquals(all.leases.map((l) => String(l.subnet)), [String(gone.subnet)], "the reader sees it");
    assertEquals(tree(dir), before, "listing changed nothing on disk");
    await reader.acquireLease(attrs("192.0.2.2"));
    // By owner, not by file name: the new lease may draw the expired one's subnet (1 in 50).
    const after = await new FileStoreReader(dir).listLeases();
    assertEquals(
      after.leases.map((l) => l.attrs.PublicIP),
      ["192.0.2.2"],
      "the writer collected the expired lease",
    );
  });
});

/** How many of this process's descriptors are open on `path` (/proc/self/fd). */
function openFds(path: string): number {
  let n = 0;
  for (const e of Deno.readDirSync("/proc/self/fd")) {
    try {
      if (Deno.readLinkSync(`/proc/self/fd/${e.name}`) === path) n++;
    } catch { /* closed meanwhile */ }
  }
  return n;
}

/** Polls every 5 ms until `ok()`, failing with `what` after 10 s. */
async function until(ok: () => boolean, what: string): Promise<void> {
  for (const end = Date.now() + 10_000; !ok();) {
    assert(Date.now() < end, what);
    await new Promise((r) => setTimeout(r, 5));
  }
}

Deno.test("file store: a watch starts from the listing's snapshot without re-reading lease files", async () => {
  await withDir(async (dir) => {
    const writer = new FileStore({ dir });
    await writer.setNetworkConfig(NET50);
    const first = await writer.acquireLease(attrs("192.0.2.1"));
    const reader = new FileStore({ dir });
    const { cursor } = await reader.listLeases();
    // Overwrite the lease file behind the store's back (the change counter stays): a watch that re-read
    // every file would now report the lease as removed (the file no longer parses).
    const path = `${dir}/subnets/${first.subnet!.toKey()}`;
    await Deno.writeTextFile(path, "{corrupt");
    const ac = new AbortController();
    const it = reader.watchLeases(cursor, ac.signal)[Symbol.asyncIterator]();
    // The watch is set up once it has read the change counter (under a shared lock of .lock, after inotify
    // started): hold the lock as a writer would, see the watch open .lock too (waiting for the lock), let
    // it go, and see .lock closed again. A write before that read would rightly make the watch re-read all.
    const lockPath = `${dir}/.lock`;
    const held = await Deno.open(lockPath, { read: true, write: true });
    await held.lock(true);
    try {
      const pendingNext = it.next();
      await until(() => openFds(lockPath) > 1, "the watch never opened .lock to read the change counter");
      held.close(); // releases the flock
      await until(() => openFds(lockPath) === 0, "the watch never closed .lock after reading the counter");
      const second = await writer.acquireLease(attrs("192.0.2.2"));
      const got = await pendingNext;
      assert(!got.done);
      assertEquals(got.value.map((e) => [e.type, String(e.lease.subnet)]), [[
        "added",
        String(second.subnet),
      ]]);
    } finally {
      try {
        held.close();
      } catch { /* already closed */ }
      ac.abort();
      await it.return?.();
    }
  });
});

Deno.test("file store: a lease a writer has put in place but not yet counted when a watch starts is reported", async () => {
  await withDir(async (dir) => {
    const writer = new FileStore({ dir });
    await writer.setNetworkConfig(NET50);
    await writer.acquireLease(attrs("192.0.2.1"));
    const reader = new FileStore({ dir });
    const { cursor } = await reader.listLeases();
    // Another writer between its two writes, as the store makes them under the exclusive lock: the lease
    // file renamed into place, the change counter not bumped yet. A watch starting now sees no event for
    // the file (it is already there) and, reading the counter too early, no reason to look.
    const lock = await Deno.open(`${dir}/.lock`, { read: true, write: true });
    await lock.lock(true);
    const seq = Number((await Deno.readTextFile(`${dir}/seq`)).trim()) + 1;
    const late = { ...attrs("192.0.2.7"), BackendData: { VNI: 1, VtepMAC: "aa:bb:cc:dd:ee:07" } };
    await Deno.writeTextFile(`${dir}/tmp/late`, encodeLeaseFile(late, new Date(Date.now() + 3_600_000), seq));
    await Deno.rename(`${dir}/tmp/late`, `${dir}/subnets/10.5.77.0-24`);
    const ac = new AbortController();
    const it = reader.watchLeases(cursor, ac.signal)[Symbol.asyncIterator]();
    try {
      const pendingNext = it.next();
      await new Promise((r) => setTimeout(r, 300)); // the watch is being set up
      await Deno.writeTextFile(`${dir}/seq`, `${seq}\n`);
      lock.close(); // releases the flock: the writer is done
      let timer: ReturnType<typeof setTimeout> | undefined;
      const got = await Promise.race([
        pendingNext,
        new Promise<null>((r) => timer = setTimeout(() => r(null), 5000)),
      ]);
      clearTimeout(timer);
      assert(got && !got.done, "the watch never reported the lease written while it started");
      assertEquals(got.value.map((e) => [e.type, String(e.lease.subnet)]), [["added", "10.5.77.0/24"]]);
    } finally {
      ac.abort();
      await it.return?.();
    }
  });
});

function lease10() {
  return { subnet: IPNet.parse("10.5.10.0/24"), ipv6Subnet: null, attrs: attrs("192.0.2.9") };
}

Deno.test("file store: watchers see adds, removals and expiry", async () => {
  await withDir(async (dir) => {
    const writer = new FileStore({ dir });
    const shortLived = new FileStore({ dir, ttlMs: 1500 });
    const reader = new FileStore({ dir });
    await writer.setNetworkConfig(NET50);
    const first = await writer.acquireLease(attrs("192.0.2.1"));
    const { leases, cursor } = await reader.listLeases();
    assertEquals(leases.length, 1);
    const ac = new AbortController();
    const it = reader.watchLeases(cursor, ac.signal)[Symbol.asyncIterator]();
    try {
      const second = await writer.acquireLease(attrs("192.0.2.2"));
      let evs: LeaseEvent[] = await nextEvents(it, (e) => e.some((x) => x.type === "added"));
      assertEquals(evs.find((e) => e.type === "added")!.lease.subnet!.toString(), second.subnet!.toString());
      await writer.revokeLease(second.subnet!);
      evs = await nextEvents(it, (e) => e.some((x) => x.type === "removed"));
      assertEquals(
        evs.find((e) => e.type === "removed")!.lease.subnet!.toString(),
        second.subnet!.toString(),
      );
      // A lease with a 1.5 s TTL, not renewed: added, then a removal event at expiry (timer, no polling);
      // the file stays (watching never writes) until a writer collects it.
      const third = await shortLived.acquireLease(attrs("192.0.2.3"));
      evs = await nextEvents(it, (e) => e.some((x) => x.type === "removed"));
      assertEquals(evs.map((e) => [e.type, String(e.lease.subnet)]), [
        ["added", String(third.subnet)],
        ["removed", String(third.subnet)],
      ]);
      assertEquals((await reader.listLeases()).leases.length, 1);
      assertEquals([...Deno.readDirSync(`${dir}/subnets`)].length, 2, "expired lease file kept by readers");
      // A subnet `first` (drawn at random) does not hold: reserving its own would be a conflict (1 in 50).
      const reserved = IPNet.parse(["10.5.40.0/24", "10.5.41.0/24"].find((x) => x !== String(first.subnet))!);
      await writer.reserve(reserved, "192.0.2.40");
      assertEquals(
        [...Deno.readDirSync(`${dir}/subnets`)].map((e) => e.name).sort(),
        [reserved.toKey(), first.subnet!.toKey()].sort(),
        "a writer collected the expired lease file",
      );
    } finally {
      ac.abort();
      await it.return?.();
    }
  });
});

Deno.test("file store: 50 processes acquire 50 distinct subnets; the 51st is out of subnets", async () => {
  await withDir(async (dir) => {
    const s = new FileStore({ dir });
    await s.setNetworkConfig(NET50);
    const results = await acquireInProcesses({ storeDir: dir }, 50);
    const subnets = results.map((r) => r.subnet);
    assertEquals(results.filter((r) => r.error).map((r) => r.error), []);
    assertEquals(new Set(subnets).size, 50);
    const { leases } = await s.listLeases();
    assertEquals(leases.length, 50, "none lost");
    const err = await assertRejects(() => s.acquireLease(attrs("198.51.100.1")), OutOfSubnetsError);
    assertStringIncludes(err.message, "out of subnets");
  });
});
