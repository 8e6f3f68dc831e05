/**
 * The `-o/--output` flag of every command that has one, validated the same way everywhere: a usage error
 * (exit 2) in the CLI's one format, `-o/--output: <problem>; <hint>`.
 * @module
 */
import { UsageError } from "../errors.ts";

/** The output formats of flanctl's commands. */
export type OutputFormat = "table" | "json";

/** Parses an `-o` value (absent = `table`); throws {@link UsageError} naming the flag and the choices. */
export function parseOutput(v: unknown, allowed: readonly OutputFormat[] = ["table", "json"]): OutputFormat {
  if (v === undefined) return allowed[0];
  if (typeof v === "string" && (allowed as readonly string[]).includes(v)) return v as OutputFormat;
  throw new UsageError(`-o/--output: '${v}' is not an output format; use ${allowed.join(" or ")}`);
}
