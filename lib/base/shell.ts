/**
 * Shell quoting for doctor's fix lines: an operator pastes them into a shell, and the values in them come
 * from the kernel (interface names: any bytes but '/' and whitespace), the store or files — none of it may
 * run as shell code. {@link shellQuote} quotes one word; {@link sh} is a template tag that quotes every
 * interpolated value (the literal parts are ours).
 * @module
 */

/** One word for a POSIX shell: as it is when it holds only safe characters, else in single quotes. */
export function shellQuote(word: string | number | null | undefined): string {
  const s = String(word);
  return /^[A-Za-z0-9_.,:/=@+%-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}

/** A command line whose interpolated values are each quoted as one shell word ({@link shellQuote}). */
export function sh(strings: TemplateStringsArray, ...values: (string | number | null | undefined)[]): string {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += shellQuote(values[i]) + strings[i + 1];
  return out;
}

/** Space-separated words (a rule's location as nft prints it), each quoted ({@link shellQuote}). */
export function words(text: string): string {
  return text.split(" ").filter(Boolean).map(shellQuote).join(" ");
}

/** `s` in single quotes always (a quote inside closed, escaped and reopened): `'a'\''b'`. */
export function singleQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}
