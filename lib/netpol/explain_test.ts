import { assert, assertEquals, assertStringIncludes, assertThrows } from "../../tests/assert.ts";
import { UsageError } from "../base/errors.ts";
import { explain, parsePortProto, renderPolicyTrace } from "./explain.ts";
import { CASES } from "../../tests/netpol_cases.ts";
import { caseObjects, clusterOf, type Json } from "../../tests/netpol_fixture.ts";

const UNION = CASES.find((c) => c.name.startsWith("several policies are a union"))!;

Deno.test("netpol trace: the verdict per family with the deciding policy and rule", () => {
  const o = caseObjects(UNION);
  const c = clusterOf(o.pods, o.namespaces, o.policies);
  const q = { from: "x/c", to: "x/a", ...parsePortProto("80/tcp") };
  const ts = explain(c, q);
  assertEquals(ts.map((t) => [t.family, t.verdict.allowed, t.verdict.ingress.by]), [
    [4, true, { policy: "x/from-c", rule: 0 }],
    [6, true, { policy: "x/from-c", rule: 0 }],
  ]);
  const text = renderPolicyTrace(q, ts);
  assertStringIncludes(text, "x/c (10.99.1.12) -> x/a (10.99.1.10) tcp/80 IPv4: ALLOWED");
  assertStringIncludes(
    text,
    "ingress of x/a: allowed by x/from-c ingress[0] (isolated by x/from-b, x/from-c)",
  );
  assertStringIncludes(text, "egress of x/c: open (no policy selects it for egress)");
  const denied = explain(c, { from: "y/b", to: "10.99.1.10", ...parsePortProto("80") });
  assertEquals(denied.length, 1);
  assert(!denied[0].verdict.allowed);
  assertStringIncludes(
    renderPolicyTrace({ from: "y/b", to: "10.99.1.10", proto: "TCP", port: 80 }, denied),
    "denied: no rule of x/from-b, x/from-c allows it",
  );
});

Deno.test("netpol trace: bad queries are usage errors", () => {
  const o = caseObjects(UNION);
  const c = clusterOf(o.pods, o.namespaces, o.policies);
  assertThrows(
    () => explain(c, { from: "x/nope", to: "x/a", proto: "TCP", port: 80 }),
    UsageError,
    "no pod x/nope",
  );
  assertThrows(() => explain(c, { from: "x/a", to: "junk", proto: "TCP", port: 80 }), UsageError, "neither");
  for (const bad of ["0", "70000", "80/icmp", "x"]) assertThrows(() => parsePortProto(bad), UsageError);
  assertEquals(parsePortProto("53/UDP"), { proto: "UDP", port: 53 });
  assertEquals(parsePortProto(undefined), { proto: "TCP", port: 80 });
});

Deno.test("netpol trace: flanctl trace NS/POD NS/POD PORT/PROTO against an API server, exit 1 when denied", async () => {
  const o = caseObjects(UNION);
  const lists: Record<string, Json[]> = {
    "/api/v1/pods": o.pods,
    "/api/v1/namespaces": o.namespaces,
    "/apis/networking.k8s.io/v1/networkpolicies": o.policies,
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const items = lists[new URL(req.url).pathname];
    return items
      ? Response.json({ metadata: { resourceVersion: "5" }, items })
      : new Response("{}", { status: 404 });
  });
  try {
    const run = async (...args: string[]) => {
      const r = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--no-check",
          "--quiet",
          new URL("../../main.ts", import.meta.url).pathname,
          "trace",
          ...args,
        ],
        env: { NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      return {
        code: r.code,
        out: new TextDecoder().decode(r.stdout),
        err: new TextDecoder().decode(r.stderr),
      };
    };
    const api = ["--kube-subnet-mgr", `--kube-api-url=http://127.0.0.1:${server.addr.port}`];
    const ok = await run("x/b", "x/a", "80/tcp", ...api);
    assertEquals(ok.code, 0, ok.err);
    assertStringIncludes(ok.out, "ingress of x/a: allowed by x/from-b ingress[0]");
    const no = await run("y/b", "x/a", "80/tcp", ...api);
    assertEquals(no.code, 1, no.err);
    assertStringIncludes(no.out, "IPv6: DENIED");
    const json = await run("x/c", "x/a", "-o", "json", ...api);
    assertEquals(JSON.parse(json.out).verdicts[0].verdict.ingress.by, { policy: "x/from-c", rule: 0 });
  } finally {
    await server.shutdown();
  }
});
