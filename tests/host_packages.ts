/**
 * The host packages docs/deploy.md lists, for the test of that list (deploy/host_packages_test.ts) and the
 * minimal-host install-cni test that builds a root of exactly them (tests/install_cni_minimal_host_test.ts).
 * @module
 */
import { ROOT } from "./netns.ts";

/** The Debian packages docs/deploy.md says a node must have. */
export function hostPackages(): string[] {
  const doc = Deno.readTextFileSync(`${ROOT}docs/deploy.md`);
  const m = /<!-- host-packages: ([^>]+) -->/.exec(doc);
  if (!m) throw new Error("docs/deploy.md: no host-packages line");
  return m[1].trim().split(/\s+/);
}
