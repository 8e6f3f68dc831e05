/**
 * Writing a command's output to stdout when the reader may go away first (`flanctl doctor | head`): a
 * closed pipe (EPIPE) ends the output quietly — no stack trace, and the command still exits with the code
 * it would have had (doctor's Nagios code, status's daemon state). Deno ignores SIGPIPE, so a write to a
 * closed pipe throws BrokenPipe instead of ending the process as it would a C program.
 * @module
 */

const enc = new TextEncoder();

/** Writes all of `text` to stdout; false when the reader closed the pipe (then nothing more should be written). */
export function writeOut(text: string): boolean {
  const b = enc.encode(text);
  try {
    for (let off = 0; off < b.length;) off += Deno.stdout.writeSync(b.subarray(off));
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.BrokenPipe) return false;
    throw e;
  }
}
