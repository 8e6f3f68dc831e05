/**
 * V8's code cache of the CNI bundle, made at install time. Deno keeps it, and its module analysis caches,
 * in DENO_DIR as SQLite databases in WAL mode ({@link DENO_CACHE_DBS}), and two things make a plain first
 * run not enough:
 *
 * - Deno writes the code cache from a background thread after the module ran; a run that exits at once
 *   (CNI VERSION) usually beats that thread (docs/performance.md, "The CNI code cache"), and then no cache is
 *   written: the first pod's ADD compiles the whole bundle, and whichever call writes the cache later
 *   leaves it in the write-ahead log. {@link warmCodeCache} runs the bundle until the entry is there.
 * - A Deno process never closes the databases (it exits), so what a run wrote stays in the write-ahead
 *   log, and SQLite rebuilds the log's index on every later open by reading the whole log, one 4 KiB
 *   frame at a time: the code cache was read again by every plugin call (its cost: docs/performance.md,
 *   "The CNI code cache"). {@link checkpointDenoCaches}
 *   moves the log into the database files; later calls open an empty log.
 * @module
 */
import { DatabaseSync } from "node:sqlite";

/** Deno's cache databases in DENO_DIR (Deno 2.x). */
export const DENO_CACHE_DBS: readonly string[] = [
  "v8_code_cache_v2",
  "dep_analysis_cache_v2",
  "node_analysis_cache_v2",
];

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/**
 * Checkpoints each of {@link DENO_CACHE_DBS} that exists in `denoDir` (`PRAGMA wal_checkpoint(TRUNCATE)`:
 * the log's pages into the database, the log emptied). Returns the names checkpointed. Safe while plugin
 * calls run: a database in use is left as it is (SQLite reports it busy). Throws only for a database that
 * cannot be opened.
 */
export function checkpointDenoCaches(denoDir: string): string[] {
  const done: string[] = [];
  for (const name of DENO_CACHE_DBS) {
    const path = `${denoDir}/${name}`;
    if (!isFile(path)) continue;
    const db = new DatabaseSync(path);
    try {
      db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
      done.push(name);
    } finally {
      db.close();
    }
  }
  return done;
}

/** Whether `denoDir` holds a V8 code cache entry for module `specifier` (a `file://` URL). */
export function hasCodeCache(denoDir: string, specifier: string): boolean {
  const path = `${denoDir}/v8_code_cache_v2`;
  if (!isFile(path)) return false;
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return db.prepare("SELECT 1 FROM codecache WHERE specifier = ?").get(specifier) !== undefined;
  } catch {
    return false; // no table yet
  } finally {
    db.close();
  }
}

/** How many entries the code cache database in `denoDir` holds (-1 without one). */
export function codeCacheEntries(denoDir: string): number {
  const path = `${denoDir}/v8_code_cache_v2`;
  if (!isFile(path)) return -1;
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return Number((db.prepare("SELECT count(*) AS n FROM codecache").get() as { n: number }).n);
  } catch {
    return -1; // no table yet
  } finally {
    db.close();
  }
}

/**
 * Runs `run` (one call of the bundle, e.g. CNI VERSION with the launcher's flags and CNI_WARM_ENV) until
 * `denoDir` holds the code cache of `specifier` and a run added no entry (what the run's child process
 * loads of Deno's own modules is cached too), at most `tries` times, then checkpoints the databases.
 * Returns whether the cache of `specifier` is there. `run`'s own failures are the caller's to report (it is
 * called again regardless).
 *
 * Deno stores the cache from a background thread that the bundle's exit usually beats (how often:
 * docs/performance.md, "The CNI code cache"). With 5 tries the cache was missing for a few installs in a
 * hundred (a CI run of lib/install/cni_test.ts hit it); 30 tries (≤ ~2 s, once per install) make a miss
 * about one in 10^8.
 */
export async function warmCodeCache(
  denoDir: string,
  specifier: string,
  run: () => Promise<unknown>,
  tries = 30,
): Promise<boolean> {
  let ok = false, stable = false, before = codeCacheEntries(denoDir);
  for (let i = 0; !(ok && stable) && i < tries; i++) {
    await run();
    const now = codeCacheEntries(denoDir);
    stable = now === before;
    before = now;
    ok = hasCodeCache(denoDir, specifier);
  }
  checkpointDenoCaches(denoDir);
  return ok;
}
