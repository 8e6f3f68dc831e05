import { assertEquals, assertThrows } from "../../../tests/assert.ts";
import { cell, renderTable } from "./table.ts";
import { parseOutput } from "./output.ts";
import { UsageError } from "../errors.ts";

Deno.test("renderTable: aligned columns, last one unpadded, no trailing blanks, missing cells empty", () => {
  assertEquals(
    renderTable(["A", "LONG-HEAD", "C"], [["xyz", "1", "last"], ["q", "", ""], ["w"]]),
    [
      "A    LONG-HEAD  C",
      "xyz  1          last",
      "q",
      "w",
    ].join("\n"),
  );
  assertEquals(renderTable(["ONLY"], []), "ONLY");
  assertEquals([cell(null), cell(undefined), cell(""), cell(0), cell("x")], ["-", "-", "-", "0", "x"]);
});

Deno.test("parseOutput: table default, json, anything else a usage error naming -o and the choices", () => {
  assertEquals(parseOutput(undefined), "table");
  assertEquals(parseOutput("json"), "json");
  const e = assertThrows(() => parseOutput("yaml"), UsageError);
  assertEquals(e.message, "-o/--output: 'yaml' is not an output format; use table or json");
  assertEquals((e as UsageError).exitCode, 2);
});
