/**
 * Typed errors shared by every part of flanctl. Each carries the exit code the CLI should use, so
 * `cli/` can turn any failure into a clear message and a non-zero exit without guessing.
 * @module
 */

/** Base class of every error flanctl raises on purpose. */
export class FlanctlError extends Error {
  /** Process exit code the CLI uses for this error. */
  readonly exitCode: number;
  /**
   * Makes the error.
   *
   * @param message the one-line text shown to the user
   * @param exitCode the process exit code the CLI uses (1 unless given)
   * @param options the standard `cause`
   */
  constructor(message: string, exitCode = 1, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.exitCode = exitCode;
  }
}

/** Bad command-line input (exit code 2). Name the flag/argument and the fix in the message. */
export class UsageError extends FlanctlError {
  /**
   * Makes the error.
   *
   * @param message the one-line text naming the flag and the fix
   */
  constructor(message: string) {
    super(message, 2);
  }
}

/** A value that does not parse (an IP, a CIDR, a JSON document). `field` names what was wrong. */
export class ParseError extends FlanctlError {
  /** The field or input that failed to parse. */
  readonly field: string;
  /**
   * Makes the error.
   *
   * @param field the field or input that failed to parse
   * @param message what is wrong with it
   */
  constructor(field: string, message: string) {
    super(`${field}: ${message}`, 1);
    this.field = field;
  }
}

/** A named network namespace (or netns path/pid) that does not exist. */
export class NetnsNotFoundError extends FlanctlError {
  /** The namespace name, path or pid that was asked for. */
  readonly netns: string;
  constructor(netns: string) {
    super(`network namespace '${netns}' not found (see 'ip netns list')`, 1);
    this.netns = netns;
  }
}

/** The text of a thrown value: an Error's message, anything else as a string. The one error-to-text helper. */
export function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
