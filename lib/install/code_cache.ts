/**
 * Deno keeps V8's code cache and its module analysis caches in DENO_DIR as SQLite databases in WAL mode
 * ({@link DENO_CACHE_DBS}). A Deno process never closes them cleanly (it exits), so what the first run of a
 * module wrote stays in the write-ahead log, and SQLite rebuilds the log's index on every later open: it
 * reads the whole log, one 4 KiB frame at a time. For the CNI bundle that was the ~450 KiB code cache
 * (up to ~4 MiB where other commands shared the directory) read again by every plugin call: measured,
 * an ADD and a DEL ~2-4 ms each. {@link checkpointDenoCaches} moves the log into the database files once,
 * after the run that wrote the cache (install.sh, `flanctl install-cni`); later calls open an empty log.
 * @module
 */
import { DatabaseSync } from "node:sqlite";

/** Deno's cache databases in DENO_DIR (Deno 2.x). */
export const DENO_CACHE_DBS: readonly string[] = [
  "v8_code_cache_v2",
  "dep_analysis_cache_v2",
  "node_analysis_cache_v2",
];

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
    try {
      if (!Deno.statSync(path).isFile) continue;
    } catch {
      continue;
    }
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
