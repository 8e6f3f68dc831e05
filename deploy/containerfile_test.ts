/** deploy/Containerfile agrees with build-image.sh's packages, deno.json's version and install.sh's packages. */
import { assert, assertEquals } from "../tests/assert.ts";
import { ROOT } from "../tests/netns.ts";

const VERSION = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`)).version as string;

Deno.test("Containerfile: build-image.sh's packages and deno.json's version", () => {
  const cf = Deno.readTextFileSync(`${ROOT}deploy/Containerfile`);
  const sh = Deno.readTextFileSync(`${ROOT}deploy/build-image.sh`);
  const cfPkgs = /^ARG PACKAGES="([^"]+)"/m.exec(cf)?.[1].split(" ");
  const shPkgs = /^PACKAGES=(\S+)$/m.exec(sh)?.[1].split(",");
  assert(cfPkgs && shPkgs, "package lists not found");
  assertEquals(cfPkgs, shPkgs);
  assertEquals(/^ARG VERSION=(\S+)$/m.exec(cf)?.[1], VERSION);
  // install.sh's product packages are all in the image (it checks them with dpkg-query inside it).
  const inst = /^pkgs=\(([^)]+)\)$/m.exec(Deno.readTextFileSync(`${ROOT}install.sh`))?.[1].split(" ");
  assert(inst, "install.sh's package list not found");
  assertEquals(inst.filter((p) => !shPkgs.includes(p)), []);
});
