/**
 * The one text-table renderer of every command (`inspect`, `lease`, `lab status`): columns aligned on the
 * widest cell, separated by two spaces, the last column not padded, no trailing blanks. A pure function
 * of its rows; it prints nothing. Cells are shown with their control characters escaped
 * ({@link escapeControl}): a link name holding an ESC byte cannot drive the operator's terminal.
 * @module
 */

/** Lays out `rows` under `head` as aligned columns. Missing cells are empty; a table without rows is its head. */
export function renderTable(head: string[], rows: string[][]): string {
  rows = rows.map((r) => r.map(escapeControl));
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) =>
    head.map((_, i) => (i === head.length - 1 ? (r[i] ?? "") : (r[i] ?? "").padEnd(w[i]))).join("  ")
      .trimEnd();
  return [line(head), ...rows.map(line)].join("\n");
}

/** A cell for an absent value: `-` for null, undefined and "", else the value as text. */
export function cell(v: string | number | null | undefined): string {
  return v === null || v === undefined || v === "" ? "-" : String(v);
}

/**
 * `text` with every control character (C0 but newline, DEL, C1) as `\xNN`, for text output: values from
 * the kernel, a store or a file (interface names may hold any byte but `/`, `:` and whitespace) cannot
 * move the cursor, clear the screen or set the title of the terminal that shows them.
 */
export function escapeControl(text: string): string {
  return text.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

/** C0 control characters but tab and newline, DEL and C1. */
// deno-lint-ignore no-control-regex
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
