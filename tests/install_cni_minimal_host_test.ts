/**
 * install-cni needs nothing from the host (issue 27): a root filesystem made of exactly the packages
 * docs/deploy.md lists as what a node must have (no libnl, no libnftables, no iptables) runs the installed
 * plugins — flannel ADD, CHECK, STATUS, DEL and portmap ADD/DEL over nftables through the bundled
 * libnftables — inside a node namespace of the test's own, the plugins chrooted into that root.
 *
 * The root filesystem is made with mmdebstrap (--variant=extract, ~15 s) from this machine's apt sources
 * (tools/mirrors.sh) and cached in /var/cache/flanctl-dev/image by the hash of its package list and mirrors. Without mmdebstrap the test is skipped with
 * a warning, and fails under CI=true (./install.sh --dev installs it).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { installCni } from "../lib/install/cni.ts";
import { RUNTIME_LIB_DIR } from "../lib/os/mod.ts";
import { ROOT, run, sh, withNetns } from "./netns.ts";

const HAVE_MMDEBSTRAP = (() => {
  try {
    return Deno.statSync("/usr/bin/mmdebstrap").isFile;
  } catch {
    return false;
  }
})();
if (!HAVE_MMDEBSTRAP) {
  const what = "mmdebstrap not installed (apt-get install mmdebstrap, or ./install.sh --dev)";
  if (Deno.env.get("CI") === "true") {
    Deno.test("minimal-host install-cni test needs mmdebstrap", () => {
      throw new Error(`${what}; under CI the test may not be skipped`);
    });
  } else console.error(`warning: ${what}; skipping the minimal-host install-cni test`);
}

/** The Debian packages docs/deploy.md says a node must have. */
export function hostPackages(): string[] {
  const doc = Deno.readTextFileSync(`${ROOT}docs/deploy.md`);
  const m = /<!-- host-packages: ([^>]+) -->/.exec(doc);
  if (!m) throw new Error("docs/deploy.md: no host-packages line");
  return m[1].trim().split(/\s+/);
}

Deno.test("docs/deploy.md: every host package is named in its list", () => {
  const doc = Deno.readTextFileSync(`${ROOT}docs/deploy.md`);
  const section = doc.slice(doc.indexOf("## What a node must have"), doc.indexOf("<!-- host-packages"));
  for (const p of hostPackages()) assertStringIncludes(section, `\`${p}\``);
});

const CACHE = "/var/cache/flanctl-dev/image";

/** This machine's apt sources for bookworm as mmdebstrap's source lines (tools/mirrors.sh's apt_sources). */
async function aptSources(): Promise<string[]> {
  const r = await run(["bash", "-c", 'source "$1" && apt_sources bookworm', "_", `${ROOT}tools/mirrors.sh`]);
  if (r.code !== 0) throw new Error(r.stderr.trim());
  return r.stdout.trim().split("\n");
}

/** The root filesystem of `pkgs` (mmdebstrap, cached by the hash of the list and the mirrors). */
async function minimalRoot(pkgs: string[]): Promise<string> {
  const mirrors = await aptSources();
  const inputs = ["bookworm", pkgs.join(","), ...mirrors].join("\n");
  const key = Array.from(
    new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(inputs))),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("").slice(0, 16);
  const tar = `${CACHE}/host-${key}.tar`;
  try {
    if (Deno.statSync(tar).isFile) return tar;
  } catch { /* build it */ }
  await Deno.mkdir(CACHE, { recursive: true });
  const tmp = `${CACHE}/.host-${key}.${Deno.pid}.tar`; // mmdebstrap picks the format by the extension
  const r = await run([
    "mmdebstrap",
    "--quiet",
    "--variant=extract",
    "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
    `--include=${pkgs.join(",")}`,
    "bookworm",
    tmp,
    ...mirrors,
  ], { env: { SOURCE_DATE_EPOCH: "1700000000" } });
  if (r.code !== 0) {
    await Deno.remove(tmp).catch(() => {});
    throw new Error(`mmdebstrap failed: ${r.stderr.slice(-2000)}`);
  }
  await Deno.rename(tmp, tar);
  return tar;
}

needsRoot.test({
  name: "install-cni: the installed plugins work in a root with only the listed host packages (no libnl)",
  ignore: !HAVE_MMDEBSTRAP,
  sanitizeResources: false,
  fn: () =>
    withNetns(async (fx) => {
      const tar = await minimalRoot(hostPackages());
      const work = await Deno.makeTempDir({ prefix: "flanctl-minhost-" });
      try {
        const root = `${work}/root`;
        await Deno.mkdir(root);
        assertEquals((await run(["tar", "-xf", tar, "-C", root])).code, 0);
        // Nothing of what the plugins load is there.
        const found = await run([
          "find",
          root,
          "-name",
          "libnl*",
          "-o",
          "-name",
          "libnftables*",
          "-o",
          "-name",
          "iptables*",
          "-o",
          "-name",
          "libmnl*",
        ]);
        assertEquals(found.stdout.trim(), "", "the minimal root has libnl or netfilter pieces");

        // install-cni, as the init container runs it: the bin dir at the same path inside and outside.
        const bin = `${work}/cni/bin`;
        const js = `${work}/cni.js`;
        const b = await run([
          Deno.execPath(),
          "bundle",
          "--quiet",
          "--platform",
          "deno",
          "-o",
          js,
          `${ROOT}cli/cni_main.ts`,
        ]);
        assertEquals(b.code, 0, b.stderr);
        await installCni({
          binDir: bin,
          confDir: `${work}/net.d`,
          conf: null,
          runtime: { deno: Deno.execPath(), cniJs: js },
        });
        const rt = [...Deno.readDirSync(bin)].find((e) => e.name.startsWith(".flanctl-runtime-"))!.name;
        const libs = [...Deno.readDirSync(`${bin}/${rt}/${RUNTIME_LIB_DIR}`)].map((e) => e.name).sort();
        assert(libs.includes("libnl-route-3.so.200") && libs.includes("libnftables.so.1"), `libs: ${libs}`);
        await Deno.mkdir(`${root}${bin}`, { recursive: true });
        for (const d of ["proc", "dev", "sys", "run/netns"]) {
          await Deno.mkdir(`${root}/${d}`, { recursive: true });
        }
        await Deno.mkdir(`${root}/run/flannel`, { recursive: true });
        Deno.writeTextFileSync(
          `${root}/run/flannel/subnet.env`,
          "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.7.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
        );

        const node = await fx.add("mn");
        const pod = await fx.add("mp");
        const plugin = async (name: string, command: string, conf: unknown) => {
          const script = [
            "set -e",
            `mount --bind '${bin}' '${root}${bin}'`,
            `mount -t proc proc '${root}/proc'`,
            `mount --bind /dev '${root}/dev'`,
            `mount --bind /sys '${root}/sys'`,
            `mount --rbind /run/netns '${root}/run/netns'`,
            `exec env -i PATH=/usr/bin:/bin CNI_COMMAND=${command} CNI_CONTAINERID=minhost1 ` +
            `CNI_NETNS=/run/netns/${pod} CNI_IFNAME=eth0 CNI_PATH='${bin}' /usr/sbin/chroot '${root}' '${bin}/${name}'`,
          ].join("\n");
          const p = new Deno.Command("ip", {
            args: [
              "netns",
              "exec",
              node,
              "unshare",
              "--mount",
              "--propagation",
              "private",
              "sh",
              "-c",
              script,
            ],
            stdin: "piped",
            stdout: "piped",
            stderr: "piped",
          }).spawn();
          const w = p.stdin.getWriter();
          await w.write(new TextEncoder().encode(JSON.stringify(conf)));
          await w.close();
          const o = await p.output();
          return {
            code: o.code,
            stdout: new TextDecoder().decode(o.stdout),
            stderr: new TextDecoder().decode(o.stderr),
          };
        };
        const conf = {
          cniVersion: "1.1.0",
          name: "cbr0",
          type: "flannel",
          delegate: { hairpinMode: true, isDefaultGateway: true },
        };
        const add = await plugin("flannel", "ADD", conf);
        assertEquals(add.code, 0, `ADD: ${add.stdout} ${add.stderr}`);
        const result = JSON.parse(add.stdout);
        assertEquals(result.ips[0].address, "10.244.7.2/24");
        assertStringIncludes(await sh("ip", "-n", pod, "-o", "addr", "show", "eth0"), "10.244.7.2/24");
        const check = await plugin("flannel", "CHECK", { ...conf, prevResult: result });
        assertEquals(check.code, 0, `CHECK: ${check.stdout} ${check.stderr}`);
        const status = await plugin("flannel", "STATUS", conf);
        assertEquals(status.code, 0, `STATUS: ${status.stdout} ${status.stderr}`);
        // portmap: no iptables in this root, so nftables, through the bundled libnftables.
        const pm = {
          cniVersion: "1.1.0",
          name: "cbr0",
          type: "portmap",
          capabilities: { portMappings: true },
          runtimeConfig: { portMappings: [{ hostPort: 18080, containerPort: 80, protocol: "tcp" }] },
          prevResult: result,
        };
        const pmAdd = await plugin("portmap", "ADD", pm);
        assertEquals(pmAdd.code, 0, `portmap ADD: ${pmAdd.stdout} ${pmAdd.stderr}`);
        assertStringIncludes(await sh("ip", "netns", "exec", node, "nft", "list", "ruleset"), "18080");
        const pmDel = await plugin("portmap", "DEL", pm);
        assertEquals(pmDel.code, 0, `portmap DEL: ${pmDel.stdout} ${pmDel.stderr}`);
        const del = await plugin("flannel", "DEL", conf);
        assertEquals(del.code, 0, `DEL: ${del.stdout} ${del.stderr}`);
        const links = await run(["ip", "-n", pod, "link", "show", "eth0"]);
        assert(links.code !== 0, "eth0 is still in the pod after DEL");
      } finally {
        await run(["umount", "-R", `${work}/root${work}/cni/bin`]);
        await Deno.remove(work, { recursive: true }).catch(() => {});
      }
    }),
});
