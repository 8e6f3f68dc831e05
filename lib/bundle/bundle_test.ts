import { assertEquals } from "../../tests/assert.ts";
import { kubeconfigTokens, redact } from "./bundle.ts";

Deno.test("bundle redaction: known values, token/password fields, bearer, URL credentials, PEM keys, env", () => {
  assertEquals(redact("pw is hunter22 here", ["hunter22"]), "pw is <redacted> here");
  assertEquals(
    redact(`{"token": "abc.def", "password":"x\\"y"}`, []),
    `{"token": "<redacted>", "password":"<redacted>"}`,
  );
  assertEquals(redact("    token: abc123\n", []), "    token: <redacted>\n");
  assertEquals(redact("Authorization: Bearer eyJhbGci.x-y", []), "Authorization: Bearer <redacted>");
  assertEquals(redact("https://root:pa55@10.0.0.1:2379", []), "https://root:<redacted>@10.0.0.1:2379");
  assertEquals(redact("flanneld --etcd-password=pa55 -v", []), "flanneld --etcd-password=<redacted> -v");
  assertEquals(redact("FLANNELD_ETCD_PASSWORD=pa55", []), "FLANNELD_ETCD_PASSWORD=<redacted>");
  assertEquals(
    redact("a\n-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\nb", []),
    "a\n<redacted> private key\nb",
  );
  assertEquals(
    redact("FLANNEL_SUBNET=10.244.1.1/24 FLANNEL_MTU=1450", []),
    "FLANNEL_SUBNET=10.244.1.1/24 FLANNEL_MTU=1450",
  );
  assertEquals(kubeconfigTokens("users:\n- user:\n    token: 'tok-1'\n  x:\n    token: tok2\n"), [
    "tok-1",
    "tok2",
  ]);
});
