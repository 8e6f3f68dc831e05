/**
 * The one text-table renderer of every command (`inspect`, `lease`, `lab status`): columns aligned on the
 * widest cell, separated by two spaces, the last column not padded, no trailing blanks. A pure function
 * of its rows; it prints nothing.
 * @module
 */

/** Lays out `rows` under `head` as aligned columns. Missing cells are empty; a table without rows is its head. */
export function renderTable(head: string[], rows: string[][]): string {
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
