import { assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { writeCniBin } from "./pods.ts";
import { shq } from "./proc.ts";
import type { LabState } from "./types.ts";

/** Runs `path` as a CNI runtime would: CNI_COMMAND=VERSION, the config on stdin. */
async function version(path: string): Promise<{ code: number; out: string }> {
  const p = new Deno.Command(path, {
    env: { CNI_COMMAND: "VERSION" },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode('{"cniVersion":"1.0.0","name":"n","type":"loopback"}'));
  await w.close();
  const o = await p.output();
  return { code: o.code, out: new TextDecoder().decode(o.stdout) + new TextDecoder().decode(o.stderr) };
}

Deno.test("writeCniBin: the lab's plugins run as plugins, from a checkout and through an installed launcher", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-cnibin-" });
  try {
    // From this checkout: Deno running main.ts.
    writeCniBin({ dir: `${dir}/a` } as LabState);
    let r = await version(`${dir}/a/cni-bin/loopback`);
    assertEquals(r.code, 0, r.out);
    assertStringIncludes(r.out, '"supportedVersions"');
    // As installed: this tree's code at <prefix>/lib/flanctl/src and a launcher at <prefix>/bin/flanctl as
    // install.sh writes it (it sets FLANCTL_ARGV0 from its own $0, whatever its caller set), which
    // flanctlCommand there returns; the lab's entries must reach it under the plugin's name.
    const root = new URL("../../", import.meta.url).pathname;
    const src = `${dir}/inst/lib/flanctl/src`;
    await Deno.mkdir(src, { recursive: true });
    for (const f of ["main.ts", "deno.json", "deno.lock", "lib", "cli"]) {
      const c = await new Deno.Command("cp", { args: ["-r", `${root}${f}`, `${src}/`] }).output();
      assertEquals(c.code, 0, new TextDecoder().decode(c.stderr));
    }
    await Deno.mkdir(`${dir}/inst/bin`);
    await Deno.writeTextFile(
      `${dir}/inst/bin/flanctl`,
      `#!/bin/sh\n# flanctl launcher (as install.sh writes it)\nFLANCTL_ARGV0="$0" exec ${
        shq(Deno.execPath())
      } run -A --no-check --quiet --config ${src}/deno.json ${src}/main.ts "$@"\n`,
      { mode: 0o755 },
    );
    const write =
      `import { writeCniBin } from "file://${src}/lib/lab/pods.ts"; writeCniBin({ dir: "${dir}/b" });`;
    const w = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-check", "--config", `${src}/deno.json`, write],
    })
      .output();
    assertEquals(w.code, 0, new TextDecoder().decode(w.stderr));
    for (const name of ["loopback", "flannel", "host-local"]) {
      r = await version(`${dir}/b/cni-bin/${name}`);
      assertEquals(r.code, 0, `${name}: ${r.out}`);
      assertStringIncludes(r.out, '"supportedVersions"', `${name} acts as a plugin: ${r.out}`);
    }
    // Written again (a second lab up in the same dir): replaced, not an error.
    writeCniBin({ dir: `${dir}/a` } as LabState);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
