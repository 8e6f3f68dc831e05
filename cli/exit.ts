/**
 * How an action ends with a non-zero exit code without an error message (doctor's Nagios codes, a failed
 * ping check, `lab exec` passing its command's code on): it throws {@link ExitStatus}, which cli/root.ts
 * turns into the code. A leaf module, so subcommands never import the root (no import cycle).
 * @module
 */

/** Ends the command with exit code `code`; nothing is printed (the action said what it had to). */
export class ExitStatus extends Error {
  /** The process exit code. */
  readonly code: number;
  constructor(code: number) {
    super(`exit ${code}`);
    this.name = "ExitStatus";
    this.code = code;
  }
}

/** Ends the command with `code` when it is not 0; returns normally otherwise. */
export function exitWith(code: number): void {
  if (code !== 0) throw new ExitStatus(code);
}
