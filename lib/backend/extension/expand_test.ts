import { assertEquals } from "../../../tests/assert.ts";
import { commandArgv, goExpand, goFields } from "./expand.ts";

// Expected values printed by Go 1.26 (`os.Expand`, `strings.Fields`) for the same inputs.
const ENV: Record<string, string> = { A: "x y", SUBNET: "10.244.1.0/24", "1": "one", $: "dollar", _b9: "u" };
const GO_EXPAND: [string, string][] = [
  ["$A", "x y"],
  ["${A}", "x y"],
  ["a$Ab", "a"],
  ["$", "$"],
  ["a$", "a$"],
  ["$$", "dollar"],
  ["$1x", "onex"],
  ["${}", ""],
  ["${", ""],
  ["${A", "A"],
  ["$-", ""],
  ["${1}", "one"],
  ["${12}", ""],
  ["$_b9.", "u."],
  ["$ A", "$ A"],
  ["$!x", "x"],
  ["pre${SUBNET}post", "pre10.244.1.0/24post"],
  ["$9A", "A"],
  ["${A}}", "x y}"],
  ["$é", "$é"],
];

Deno.test("goExpand matches Go's os.Expand", () => {
  for (const [s, want] of GO_EXPAND) assertEquals(goExpand(s, (k) => ENV[k] ?? ""), want, s);
});

Deno.test("goFields splits on Go's white space (U+0085 yes, U+FEFF no)", () => {
  assertEquals(goFields(" a\u0085b\ufeffc\u00a0d\u3000e \t"), ["a", "b\ufeffc", "d", "e"]);
  assertEquals(goFields(" \t\n"), []);
});

Deno.test("commandArgv splits before expanding: a value with spaces stays one argument", () => {
  assertEquals(
    commandArgv("/bin/echo  $A ${SUBNET};rm  $NOPE", ENV),
    ["/bin/echo", "x y", "10.244.1.0/24;rm", ""],
  );
  // Inherited names such as toString are not variables.
  assertEquals(commandArgv("x $toString", ENV), ["x", ""]);
});
