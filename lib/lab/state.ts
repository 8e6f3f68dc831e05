/**
 * The lab's state file. Every namespace, process and directory is recorded here *before* it is created,
 * and the file is replaced atomically (write + rename), so `lab down` can undo a lab after a crash or
 * Ctrl-C at any point.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { labDir, statePath } from "./paths.ts";
import type { LabState } from "./types.ts";

/** The lab does not exist (no state file). */
export class LabNotFoundError extends FlanctlError {
  constructor(name: string) {
    super(
      `lab '${name}' not found (no ${statePath(name)}); start one with 'flanctl lab up --name ${name}'`,
      1,
    );
  }
}

/** Reads a lab's state, or null when there is none. Throws on a corrupt file. */
export function readState(name: string): LabState | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(statePath(name));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
  try {
    return JSON.parse(text) as LabState;
  } catch (e) {
    throw new FlanctlError(`${statePath(name)}: not valid JSON (${(e as Error).message})`, 1);
  }
}

/** Reads a lab's state; throws {@link LabNotFoundError} when missing. */
export function loadState(name: string): LabState {
  const s = readState(name);
  if (!s) throw new LabNotFoundError(name);
  return s;
}

/** Writes the state atomically. */
export function saveState(s: LabState): void {
  Deno.mkdirSync(labDir(s.name), { recursive: true });
  const p = statePath(s.name);
  const tmp = `${p}.tmp${Deno.pid}`;
  Deno.writeTextFileSync(tmp, JSON.stringify(s, null, 2) + "\n");
  Deno.renameSync(tmp, p);
}
