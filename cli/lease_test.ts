/** `flanctl lease` against the file store in a temp dir: config, reserve, list/show, watch, revoke, errors. */
import { assert, assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { leaseCli, leaseCliCommand } from "../tests/store_helpers.ts";
import { flanctlCmd } from "../tests/netns.ts";
import { FileStore } from "../lib/store/file/file.ts";

/** The keys of a lease in `lease list --json` and `lease watch --json`, in the order they are written. */
const LEASE_KEYS = [
  "subnet",
  "publicIP",
  "backendType",
  "backendData",
  "expiration",
  "publicIPv6",
  "backendV6Data",
  "node",
];

const CONF = JSON.stringify({ Network: "10.5.0.0/16", Backend: { Type: "vxlan", VNI: 1 } });

Deno.test("flanctl lease: config set/get, reserve, list, show, revoke", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-cli-" });
  try {
    const sd = ["--store-dir", dir];
    let r = await leaseCli(["config", "set", "-", ...sd], { stdin: CONF });
    assertEquals(r.code, 0, r.stderr);
    r = await leaseCli(["config", "get", ...sd]);
    assertEquals(r.stdout.trim(), CONF);
    r = await leaseCli(["reserve", "10.5.7.0/24", "--public-ip", "192.0.2.7", ...sd]);
    assertEquals(r.code, 0, r.stderr);
    const s = new FileStore({ dir });
    await s.acquireLease({
      PublicIP: "192.0.2.8",
      PublicIPv6: null,
      BackendType: "vxlan",
      BackendData: { VNI: 1 },
    }, {
      previousSubnet: (await import("../lib/base/cidr.ts")).IPNet.parse("10.5.9.0/24"),
    });
    r = await leaseCli(["list", "-o", "json", ...sd]);
    assertEquals(r.code, 0, r.stderr);
    const rows = JSON.parse(r.stdout);
    assertEquals(rows.map((x: { subnet: string; publicIP: string }) => [x.subnet, x.publicIP]), [
      ["10.5.7.0/24", "192.0.2.7"],
      ["10.5.9.0/24", "192.0.2.8"],
    ]);
    assertEquals(Object.keys(rows[1]), LEASE_KEYS);
    assertEquals(rows[0].expiration, null);
    assert(Date.parse(rows[1].expiration) > Date.now() + 23 * 3600e3, "24 h TTL");
    r = await leaseCli(["list", ...sd]);
    assertStringIncludes(r.stdout, "SUBNET");
    assertStringIncludes(r.stdout, "never (reserved)");
    r = await leaseCli(["show", "10.5.9.0-24", "-o", "json", ...sd]);
    assertEquals(JSON.parse(r.stdout).publicIP, "192.0.2.8");
    r = await leaseCli(["revoke", "10.5.9.0/24", ...sd]);
    assertEquals(r.code, 0, r.stderr);
    r = await leaseCli(["show", "10.5.9.0/24", ...sd]);
    assertEquals(r.code, 1);
    assertStringIncludes(r.stderr, "no lease for 10.5.9.0/24");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("flanctl lease: bad input is a usage error naming the argument", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-cli-" });
  try {
    const sd = ["--store-dir", dir];
    await leaseCli(["config", "set", "-", ...sd], { stdin: CONF });
    const cases: [string[], number, string][] = [
      [["show", "10.5.x.0/24"], 2, "SUBNET: '10.5.x.0/24' is not a subnet"],
      [["revoke", "10.5.9.1/24"], 2, "has host bits set"],
      [["reserve", "10.5.7.0/24"], 2, "--public-ip: required"],
      [["reserve", "10.5.7.0/24", "--public-ip", "nope"], 2, "--public-ip: 'nope' is not an IP address"],
      [["reserve", "10.6.7.0/24", "--public-ip", "192.0.2.1"], 2, "SUBNET: 10.6.7.0/24 is not a /24 subnet"],
      [["list", "-o", "yaml"], 2, "-o/--output: 'yaml'"],
      [["config", "set", "/nonexistent/net-conf.json"], 2, "FILE: cannot read"],
      [["config", "set", "-"], 1, "Backend.Type"],
    ];
    for (const [args, code, msg] of cases) {
      const stdin = args[2] === "-"
        ? JSON.stringify({ Network: "10.5.0.0/16", Backend: { Type: "bogus" } })
        : undefined;
      const r = await leaseCli([...args, ...sd], { stdin });
      assertEquals(r.code, code, `${args.join(" ")}: ${r.stderr}`);
      assertStringIncludes(r.stderr, msg);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("flanctl lease: a missing --store-dir is an error naming it (exit 1), and is not created", async () => {
  const parent = await Deno.makeTempDir({ prefix: "flanctl-cli-" });
  try {
    const dir = `${parent}/typo`;
    for (const args of [["list"], ["show", "10.5.9.0/24"], ["watch"], ["config", "get"]]) {
      const r = await leaseCli([...args, "--store-dir", dir]);
      assertEquals(r.code, 1, `${args.join(" ")}: ${r.stderr}`);
      assertStringIncludes(r.stderr, dir);
      assertStringIncludes(r.stderr, args[0] === "config" ? "(no such directory)" : "does not exist");
    }
    assertEquals([...Deno.readDirSync(parent)], [], "nothing was created");
  } finally {
    await Deno.remove(parent, { recursive: true });
  }
});

Deno.test("flanctl lease watch: prints existing leases and new ones (json lines)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-cli-" });
  const s = new FileStore({ dir });
  await s.setNetworkConfig(CONF);
  await s.acquireLease({ PublicIP: "192.0.2.1", PublicIPv6: null, BackendType: "vxlan" });
  const child = watchProcess(dir);
  try {
    const lines = child.lines;
    await child.until((ls) => ls.length >= 1);
    await s.acquireLease({ PublicIP: "192.0.2.2", PublicIPv6: null, BackendType: "vxlan" });
    await child.until((ls) => ls.length >= 2);
    // The contract: one {type, lease} object per line, the lease exactly as `lease list` shows it.
    const evs = lines.map((l) => JSON.parse(l));
    assertEquals(evs.map((e) => [e.type, e.lease.publicIP]), [
      ["added", "192.0.2.1"],
      ["added", "192.0.2.2"],
    ]);
    for (const e of evs) {
      assertEquals(Object.keys(e), ["type", "lease"]);
      assertEquals(Object.keys(e.lease), LEASE_KEYS);
    }
    const list = JSON.parse((await leaseCli(["list", "-o", "json", "--store-dir", dir])).stdout);
    const bySubnet = (a: { subnet: string }, b: { subnet: string }) => a.subnet.localeCompare(b.subnet);
    assertEquals(evs.map((e) => e.lease).sort(bySubnet), list.sort(bySubnet));
  } finally {
    await child.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

/** Starts `flanctl lease watch -o json` and collects its lines. */
function watchProcess(dir: string) {
  const proc = leaseCliCommand(["watch", "-o", "json", "--store-dir", dir]).spawn();
  const lines: string[] = [];
  const reading = (async () => {
    let buf = "";
    for await (const chunk of proc.stdout.pipeThrough(new TextDecoderStream())) {
      buf += chunk;
      const parts = buf.split("\n");
      buf = parts.pop()!;
      lines.push(...parts.filter(Boolean));
    }
  })();
  return {
    lines,
    async until(pred: (ls: string[]) => boolean, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (!pred(lines)) {
        if (Date.now() > deadline) throw new Error(`watch printed only ${JSON.stringify(lines)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      try {
        proc.kill("SIGTERM");
      } catch { /* exited */ }
      await proc.status;
      await reading;
      await proc.stderr.cancel();
    },
  };
}
Deno.test("flanctl lease reserve: dual stack needs both subnets, written as one v4&v6 key", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-cli-" });
  try {
    const sd = ["--store-dir", dir];
    const dual = JSON.stringify({
      Network: "10.5.0.0/16",
      EnableIPv6: true,
      IPv6Network: "fc00::/48",
      Backend: { Type: "vxlan" },
    });
    await leaseCli(["config", "set", "-", ...sd], { stdin: dual });
    let r = await leaseCli(["reserve", "10.5.7.0/24", "--public-ip", "192.0.2.7", ...sd]);
    assertEquals(r.code, 2, r.stderr);
    assertStringIncludes(r.stderr, "flanctl: SUBNET6: required in a dual-stack network");
    r = await leaseCli(["reserve", "fc00:0:0:7::/64", "--public-ip", "fc00::7", ...sd]);
    assertEquals(r.code, 2, r.stderr);
    r = await leaseCli(["reserve", "10.5.7.0/24", "fc00:0:0:7::/64", "--public-ip", "192.0.2.7", ...sd]);
    assertEquals(r.code, 2);
    assertStringIncludes(r.stderr, "--public-ipv6: required with SUBNET6");
    r = await leaseCli([
      "reserve",
      "10.5.7.0/24",
      "fc00:0:0:7::/64",
      "--public-ip",
      "192.0.2.7",
      "--public-ipv6",
      "fc00::7",
      ...sd,
    ]);
    assertEquals(r.code, 0, r.stderr);
    const names = [...Deno.readDirSync(`${dir}/subnets`)].map((e) => e.name);
    assertEquals(names, ["10.5.7.0-24&fc00:0:0:7::-64"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("flanctl lease config set -: stdin is read with the config cap (32 MiB of zeros refused, naming it)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-cli-" });
  try {
    // A finite stream eight times the 4 MiB cap (an endless one would only cost more without the cap):
    // refused as usage error 2 naming the limit, and no config is written.
    const cmd = flanctlCmd("lease", "config", "set", "-", "--store-dir", dir).map((a) => `'${a}'`).join(" ");
    const r = await new Deno.Command("sh", {
      args: ["-c", `head -c 33554432 /dev/zero | timeout 60 ${cmd}`],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(r.stderr);
    assertEquals(r.code, 2, err);
    assertStringIncludes(err, "FILE: cannot read '-': stdin: has more than the 4194304 bytes allowed");
    assertEquals(await Deno.stat(`${dir}/config`).then(() => true, () => false), false, "no config written");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
