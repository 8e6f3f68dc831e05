import { assertEquals } from "../../tests/assert.ts";
import { formatLine, Logger } from "./log.ts";

Deno.test("log: logfmt lines with level, quoted values, optional time", () => {
  assertEquals(
    formatLine("info", "lease acquired", { subnet: "10.244.1.0/24" }),
    'level=info msg="lease acquired" subnet=10.244.1.0/24',
  );
  assertEquals(
    formatLine("warn", "x", { reason: 'a "b"', n: 3, skip: undefined }),
    'level=warn msg=x reason="a \\"b\\"" n=3',
  );
  assertEquals(formatLine("error", "y", {}, new Date(0)), "time=1970-01-01T00:00:00.000Z level=error msg=y");
  const lines: string[] = [];
  const l = new Logger({ level: "info", sink: (s) => lines.push(s), time: false });
  l.debug("hidden");
  l.info("shown");
  assertEquals(lines, ["level=info msg=shown"]);
});
