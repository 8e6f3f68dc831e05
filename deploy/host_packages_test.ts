/** docs/deploy.md names every package of its host-packages list in "What a node must have". */
import { assertStringIncludes } from "../tests/assert.ts";
import { ROOT } from "../tests/netns.ts";
import { hostPackages } from "../tests/host_packages.ts";

Deno.test("docs/deploy.md: every host package is named in its list", () => {
  const doc = Deno.readTextFileSync(`${ROOT}docs/deploy.md`);
  const section = doc.slice(doc.indexOf("## What a node must have"), doc.indexOf("<!-- host-packages"));
  for (const p of hostPackages()) assertStringIncludes(section, `\`${p}\``);
});
