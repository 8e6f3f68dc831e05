import { assert, assertEquals, assertRejects } from "../../tests/assert.ts";
import { isNotFound, nftDriver, NftError } from "./nft.ts";
import { FirewallError } from "./types.ts";

Deno.test("nft driver: a missing table is a typed NftError.notFound; other errors, and text alone, are not", async () => {
  const answers: Record<string, string> = {
    "list table ip flannel-ipv4\n": "Error: No such file or directory\nlist table ip flannel-ipv4\n",
    "add rule ip x y bogus\n": "Error: syntax error, unexpected string\n",
  };
  const nft = nftDriver({
    forceBinary: true,
    run: (_cmd, stdin) => Promise.resolve({ code: 1, stdout: "", stderr: answers[stdin ?? ""] ?? "" }),
  });
  const gone = await assertRejects(() => nft.run("list table ip flannel-ipv4\n"), NftError);
  assert(isNotFound(gone), gone.message);
  assertEquals((gone as NftError).tool, "nft");
  const bad = await assertRejects(() => nft.run("add rule ip x y bogus\n"), NftError);
  assert(!isNotFound(bad), bad.message);
  // The decision is the driver's, made once from nft's text: a message that merely reads alike is not it.
  assert(!isNotFound(new FirewallError("iptables-restore", "iptables-restore: No such file or directory")));
  assert(!isNotFound(new Error("No such file or directory")));
});
