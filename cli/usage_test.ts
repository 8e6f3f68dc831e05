/** Every usage error, whoever raises it (commander or our own checks): `flanctl: <flag>: <problem>; <hint>`, exit 2. */
import { assert, assertEquals } from "../tests/assert.ts";
import { flanctl } from "../tests/netns.ts";

const FORMAT = /^flanctl: \S+: [^;\n]+; [^\n]+$/;

Deno.test("usage errors: one line, flanctl: <flag>: <problem>; <hint>, exit 2", async () => {
  const cases: [string[], string][] = [
    [["lease", "list", "--bogus"], "flanctl: --bogus: unknown option; see 'flanctl lease list --help'"],
    [
      ["lease", "list", "--store-dri", "x"],
      "flanctl: --store-dri: unknown option; did you mean --store-dir? see 'flanctl lease list --help'",
    ],
    [["lease", "show"], "flanctl: SUBNET: missing argument; see 'flanctl lease show --help'"],
    [["lease", "lis"], "flanctl: lis: unknown command; did you mean list? see 'flanctl lease --help'"],
    [["frob"], "flanctl: frob: unknown command; see 'flanctl --help'"],
    [
      ["inspect", "links", "--netns"],
      "flanctl: --netns: needs a value (<name>); see 'flanctl inspect --help'",
    ],
    [["inspect", "a", "b"], "flanctl: b: unexpected argument; see 'flanctl inspect --help'"],
    [
      ["lab", "up", "--backend", "ipip"],
      "flanctl: --backend: 'ipip' is invalid; use one of vxlan, host-gw, udp, wireguard, alloc, extension",
    ],
    [["lab", "up", "--nodes", "x"], "flanctl: --nodes: 'x' is not a whole number; e.g. --nodes 3"],
    [
      ["lease", "list", "-o", "yaml"],
      "flanctl: -o/--output: 'yaml' is not an output format; use table or json",
    ],
    [["inspect", "-o", "yaml"], "flanctl: -o/--output: 'yaml' is not an output format; use table or json"],
    [["lab", "status", "-o", "x"], "flanctl: -o/--output: 'x' is not an output format; use table or json"],
    [["completion", "tcsh"], "flanctl: SHELL: 'tcsh' is not a supported shell; use bash, zsh or fish"],
  ];
  // -o is validated the same way by every command that has it: one message for a bad value.
  const BAD_OUTPUT = "flanctl: -o/--output: 'yaml' is not an output format; use table or json";
  for (
    const args of [
      ["lease", "show", "10.5.1.0/24"],
      ["lease", "watch"],
      ["doctor"],
      ["lab", "list"],
      ["status"],
      ["trace", "10.244.1.2"],
      ["lab", "trace", "node1-pod1", "node2-pod1"],
    ]
  ) cases.push([[...args, "-o", "yaml"], BAD_OUTPUT]);
  for (const [args, want] of cases) {
    const r = await flanctl(args);
    assertEquals(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    const line = r.stderr.trimEnd();
    assertEquals(line, want, args.join(" "));
    assert(FORMAT.test(line), line);
  }
});
