/** A kubeconfig that is no YAML, or names what it lacks, is quoted by a short excerpt at most. */
import { assert, assertStringIncludes } from "../../../tests/assert.ts";
import { tempDir } from "../../../tests/cni_helpers.ts";

const MARK = "TOPSECRET";

Deno.test("files: a kubeconfig that is no YAML, or names what it lacks, is quoted by a short excerpt at most", async () => {
  const d = tempDir();
  try {
    const { loadKubeconfig } = await import("./kube_client.ts");
    const msg = async (text: string) => {
      Deno.writeTextFileSync(`${d.path}/kubeconfig`, text);
      try {
        await loadKubeconfig(`${d.path}/kubeconfig`);
        return "";
      } catch (e) {
        return (e as Error).message;
      }
    };
    const bad = await msg(`a: b\n ${MARK}: [x\n  c: ${MARK}\n`);
    assertStringIncludes(bad, "is not valid YAML");
    assert(!bad.includes(MARK), bad);
    const named = await msg(`current-context: ${"z".repeat(60)}${MARK}\ncontexts: []\n`);
    assertStringIncludes(named, "has no context named");
    assert(!named.includes(MARK), named);
  } finally {
    d.cleanup();
  }
});
