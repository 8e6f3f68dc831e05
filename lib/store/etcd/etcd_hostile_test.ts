/**
 * The etcd client and store against a hostile etcd JSON gateway (issue 30, "every etcd response is
 * bounded"): a 100 MB range answer and a 100 MB watch line are refused at the cap with the process's peak
 * RSS under 200 MiB (measured in a child process), endless `more` pages stop at the page cap. The watch
 * retried with backoff waits ~30 s of real time: tests/etcd_hostile_test.ts.
 */
import { streamed } from "../../../tests/streamed_body.ts";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../../../tests/assert.ts";
import { EtcdClient } from "./etcd_client.ts";
import { ETCD_LIMITS, ResponseTooLargeError } from "../limits.ts";
import { ROOT } from "../../../tests/netns.ts";
import { fakeEtcd } from "../../../tests/etcd_fake.ts";

const MiB = 1024 * 1024;

const kv = (i: number) => ({
  key: btoa(`/coreos.com/network/subnets/10.5.${i & 255}.0-24`),
  value: btoa(JSON.stringify({ PublicIP: "10.0.0.1", BackendType: "vxlan" })),
  create_revision: "2",
  mod_revision: "2",
});

Deno.test("etcd hostile: a 100 MB range answer and a 100 MB watch line are refused; peak RSS < 200 MiB", async () => {
  const srv = fakeEtcd((path) => {
    if (path === "/v3/kv/range") {
      return new Response(
        streamed(
          `{"header":{"revision":"5"},"kvs":[`,
          `${JSON.stringify(kv(1))},`,
          `${JSON.stringify(kv(2))}]}`,
          100 * MiB,
        ),
      );
    }
    if (path === "/v3/watch") {
      return new Response(streamed(`{"result":{"events":[{"kv":{"key":"`, "QUFB", `"}}]}}\n`, 100 * MiB));
    }
    return Response.json({});
  });
  try {
    // In a child process, so its VmHWM is the client's alone.
    const script = `
      import { EtcdClient } from ${JSON.stringify(`${ROOT}lib/store/etcd/etcd_client.ts`)};
      const c = new EtcdClient({ endpoints: [${JSON.stringify(srv.url)}] });
      const out = {};
      try { await c.range("/coreos.com/network/subnets/", "x"); out.range = "ok"; } catch (e) { out.range = e.constructor.name + ": " + e.message; }
      try { for await (const _ of c.watch("/a", "x", 1, new AbortController().signal)) {} out.watch = "ended"; } catch (e) { out.watch = e.constructor.name + ": " + e.message; }
      const st = Deno.readTextFileSync("/proc/self/status");
      out.hwm = Number(/^VmHWM:\\s+(\\d+)/m.exec(st)[1]) / 1024;
      c.close();
      console.log(JSON.stringify(out));
    `;
    const o = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-check", script],
      env: { FLANCTL_TEST_PREFIX: Deno.env.get("FLANCTL_TEST_PREFIX") ?? "" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(o.stdout).trim();
    assert(o.success, new TextDecoder().decode(o.stderr));
    const r = JSON.parse(text) as { range: string; watch: string; hwm: number };
    assertStringIncludes(r.range, "ResponseTooLargeError");
    assertStringIncludes(r.range, `larger than ${ETCD_LIMITS.maxBodyBytes} bytes`);
    assertStringIncludes(r.watch, "ResponseTooLargeError");
    assertStringIncludes(r.watch, "a line is longer than");
    assert(r.hwm < 200, `VmHWM ${r.hwm} MiB`);
    console.log(`etcd hostile: client VmHWM ${r.hwm.toFixed(1)} MiB`);
  } finally {
    await srv.close();
  }
});

Deno.test("etcd hostile: endless `more` pages stop at the page cap", async () => {
  let n = 0;
  const srv = fakeEtcd(() => Response.json({ header: { revision: "5" }, kvs: [kv(n++)], more: true }));
  const c = new EtcdClient({ endpoints: [srv.url] });
  try {
    const e = await assertRejects(() => c.range("/coreos.com/network/subnets/", "x"), ResponseTooLargeError);
    assertStringIncludes(e.message, "more than 100 pages");
    assertEquals(srv.counts.get("/v3/kv/range"), 100);
  } finally {
    c.close();
    await srv.close();
  }
});
