/**
 * deploy/image-lib.sh's image_base: concurrent cold builds of one Debian base (two test files building images
 * at once on a fresh machine) run mmdebstrap once; the others wait and take the cached tarball. mmdebstrap is
 * a stand-in here that counts its runs and writes a small file: no root, no mirror.
 */
import { assertEquals } from "../tests/assert.ts";
import { ROOT, run } from "../tests/netns.ts";

Deno.test("image-lib.sh: concurrent builds of one base run mmdebstrap once and share its tarball", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-image-lib-" });
  try {
    await Deno.mkdir(`${dir}/bin`);
    // The stand-in: its target is the argument ending in .tar; it stays long enough for the builds to overlap.
    await Deno.writeTextFile(
      `${dir}/bin/mmdebstrap`,
      `#!/bin/bash
set -eu
echo run >>"${dir}/runs"
for a in "$@"; do case $a in *.tar) target=$a ;; esac; done
sleep 0.5
echo "a base" >"$target"
`,
      { mode: 0o755 },
    );
    const build = `set -euo pipefail
CACHE=$1 SUITE=bookworm MIRRORS=(deb-mirror) BASE_EPOCH=1700000000 ARCH=amd64 MMDEBSTRAP_OPTS=(--variant=essential)
log() { printf 'log: %s\\n' "$*" >&2; }
die() { printf 'die: %s\\n' "$*" >&2; exit 1; }
. "$2/deploy/image-lib.sh"
image_base iproute2,kmod
printf '%s\\n' "$base"
`;
    const env = { PATH: `${dir}/bin:${Deno.env.get("PATH")}` };
    const rs = await Promise.all(
      [1, 2, 3].map(() => run(["bash", "-c", build, "_", `${dir}/cache`, ROOT], { env })),
    );
    for (const r of rs) assertEquals(r.code, 0, r.stderr);
    const bases = new Set(rs.map((r) => r.stdout.trim()));
    assertEquals(bases.size, 1, [...bases].join(", "));
    assertEquals(await Deno.readTextFile([...bases][0]), "a base\n");
    assertEquals((await Deno.readTextFile(`${dir}/runs`)).split("\n").filter(Boolean).length, 1);
    // Nothing half-written left: the tarball, the input-hash reference and its lock file.
    const left = [...Deno.readDirSync(`${dir}/cache`)].map((e) => e.name.replace(/[0-9a-f]{16,}/, "H"))
      .sort();
    assertEquals(left, [".base-inputs-H.lock", "base-H.tar", "base-inputs-H"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
