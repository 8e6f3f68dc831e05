/**
 * doctor's colour is for terminals only: on a TTY (a pseudo-terminal from util-linux `script`) the table
 * has ANSI colour codes; through a pipe, with `-o json` on the TTY, and with NO_COLOR set, none. The
 * doctor checks an empty namespace of the test's own (a missing subnet.env is always critical).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { flanctlCmd, run, withNetns } from "./netns.ts";

const ESC = String.fromCharCode(27) + "[";

function shellQuote(argv: string[]): string {
  return argv.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" ");
}

needsRoot.test("doctor: colour on a TTY only (not in pipes, JSON, or with NO_COLOR)", () =>
  withNetns(async (fx) => {
    const ns = await fx.add("tty");
    const doctor = (...extra: string[]) => [
      "ip",
      "netns",
      "exec",
      ns,
      ...flanctlCmd("doctor", "--subnet-file", "/nonexistent/flanctl-tty/subnet.env", ...extra),
    ];
    // NO_COLOR from the runner's environment is dropped: only the case that sets it expects no colour.
    const onTty = async (argv: string[], env: string[] = []) => {
      const r = await run([
        "script",
        "-qec",
        shellQuote(["env", "-u", "NO_COLOR", ...env, ...argv]),
        "/dev/null",
      ]);
      assert(r.stdout.includes("DOCTOR") || r.stdout.includes('"checks"'), r.stdout + r.stderr);
      return r.stdout;
    };
    const tty = await onTty(doctor());
    assert(tty.includes(`${ESC}1;31mCRITICAL${ESC}0m`), `coloured on a TTY:\n${tty}`);
    const piped = await run(doctor());
    assert(piped.stdout.includes("CRITICAL"), piped.stdout);
    assertEquals(piped.stdout.includes(ESC), false, "no colour through a pipe");
    const json = await onTty(doctor("-o", "json"));
    assertEquals(json.includes(ESC), false, "no colour in JSON on a TTY");
    const noColor = await onTty(doctor(), ["NO_COLOR=1"]);
    assert(noColor.includes("CRITICAL"), noColor);
    assertEquals(noColor.includes(ESC), false, "NO_COLOR=1 turns colour off");
  }));
