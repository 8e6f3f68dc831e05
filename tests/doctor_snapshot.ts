/**
 * Snapshot comparison for the doctor's human-readable output: compares text with
 * tests/snapshots/<name>.txt; UPDATE_SNAPSHOTS=1 (re)writes the file instead.
 * @module
 */
import { assertEquals } from "./assert.ts";

const DIR = new URL("./snapshots/", import.meta.url).pathname;

/** Asserts `text` equals the stored snapshot `name` (or writes it when UPDATE_SNAPSHOTS=1). */
export async function checkSnapshot(name: string, text: string): Promise<void> {
  const path = `${DIR}${name}.txt`;
  if (Deno.env.get("UPDATE_SNAPSHOTS") === "1") {
    await Deno.mkdir(DIR, { recursive: true });
    await Deno.writeTextFile(path, text);
    return;
  }
  let want: string;
  try {
    want = await Deno.readTextFile(path);
  } catch {
    throw new Error(`snapshot ${path} missing: run with UPDATE_SNAPSHOTS=1 to create it`);
  }
  assertEquals(text, want, `output differs from ${path} (UPDATE_SNAPSHOTS=1 rewrites it)`);
}
