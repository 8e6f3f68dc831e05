import { assertEquals } from "../tests/assert.ts";
import { functionSizes, largest } from "./fn_sizes.ts";

Deno.test("fn-sizes: declarations, methods, arrows with a block; braces in strings and regexps do not count", () => {
  const src = [
    "export function outer(a: number): number {", // 1
    '  const s = "}}}";', // 2
    "  const re = /}/g;", // 3
    "  const inner = (x: number) => {", // 4
    "    return x + 1;", // 5
    "  };", // 6
    "  return inner(a) + s.length + (re.test(s) ? 1 : 0);", // 7
    "}", // 8
    "class K {", // 9
    "  constructor() {}", // 10
    "  get v(): number {", // 11
    "    return 1;", // 12
    "  }", // 13
    "  run(): void {", // 14
    "    [1].forEach(function () {", // 15
    "    });", // 16
    "  }", // 17
    "}", // 18
    "const short = (x: number) => x;", // 19: expression body: not counted
  ].join("\n");
  const got = functionSizes("a.ts", src).map((f) => [f.name, f.line, f.lines]);
  assertEquals(got, [
    ["outer", 1, 8],
    ["inner", 4, 3],
    ["K.constructor", 10, 1],
    ["K.get v", 11, 3],
    ["K.run", 14, 4],
    ["<anonymous in K.run>", 15, 2],
  ]);
  assertEquals(largest(functionSizes("a.ts", src), 2).map((f) => f.name), ["outer", "K.run"]);
});
