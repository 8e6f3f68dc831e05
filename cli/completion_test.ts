/**
 * `flanctl completion bash|zsh|fish`: generated from the command tree. The bash script is run (sourced in
 * bash, completing real command lines); the zsh and fish scripts are checked for the same entries, and
 * syntax-checked with `zsh -n` / `fish -n` when those shells are installed.
 */
import { assert, assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { flanctl, run } from "../tests/netns.ts";

async function script(shell: string): Promise<string> {
  const r = await flanctl(["completion", shell]);
  assertEquals(r.code, 0, r.stderr);
  return r.stdout;
}

Deno.test("completion bash: completes subcommands, options, argument and option values", async () => {
  const file = await Deno.makeTempFile({ prefix: "flanctl-completion-", suffix: ".bash" });
  try {
    await Deno.writeTextFile(file, await script("bash"));
    const complete = async (...words: string[]) => {
      const prog = `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); ` +
        `COMP_CWORD=${words.length - 1}; _flanctl; printf '%s\\n' "\${COMPREPLY[@]}"`;
      const r = await run(["bash", "-c", prog]);
      assertEquals(r.code, 0, r.stderr);
      return r.stdout.split("\n").filter(Boolean);
    };
    assertEquals(await complete("flanctl", "la"), ["lab", "lease"].filter((x) => x.startsWith("la")).sort());
    assertEquals(await complete("flanctl", "lab", "l"), ["list", "logs"]);
    assertEquals(await complete("flanctl", "lease", "list", "--store-d"), ["--store-dir"]);
    assertEquals(await complete("flanctl", "lease", "list", "-o", ""), ["table", "json"]);
    assertEquals(
      await complete("flanctl", "inspect", "ne"),
      ["neigh", "--netns"].filter((x) => x.startsWith("ne")),
    );
    assertEquals(await complete("flanctl", "completion", "z"), ["zsh"]);
    assertEquals(await complete("flanctl", "lab", "up", "--backend", ""), [
      "vxlan",
      "host-gw",
      "udp",
      "wireguard",
      "alloc",
      "extension",
    ]);
    // Hidden flags are not offered.
    assertEquals(await complete("flanctl", "lease", "list", "--lease-t"), []);
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("completion zsh and fish: the same commands, options and values", async () => {
  const zsh = await script("zsh");
  assert(zsh.startsWith("#compdef flanctl\n"));
  assertStringIncludes(zsh, `("flanctl lab") items=(`);
  assertStringIncludes(zsh, `'logs:print a node`);
  assertStringIncludes(
    zsh,
    `("flanctl lease list --output"|"flanctl lease list -o") compadd -- 'table' 'json'`,
  );
  assertStringIncludes(zsh, "compdef _flanctl flanctl");
  const fish = await script("fish");
  assertStringIncludes(fish, "function __flanctl_path");
  assertStringIncludes(
    fish,
    `complete -c flanctl -n 'test (__flanctl_path) = '\\''flanctl lab'\\''' -a logs`,
  );
  assertStringIncludes(fish, `-l output -s o -x -a 'table json'`);
  for (const [shell, text] of [["zsh", zsh], ["fish", fish]]) {
    const which = await run(["sh", "-c", `command -v ${shell}`]);
    if (which.code !== 0) continue; // not installed: the entries above are what is checked
    const file = await Deno.makeTempFile({ suffix: `.${shell}` });
    try {
      await Deno.writeTextFile(file, text);
      const r = await run([shell, "-n", file]);
      assertEquals(r.code, 0, `${shell} -n: ${r.stderr}`);
    } finally {
      await Deno.remove(file);
    }
  }
});
