import { assert, assertEquals, assertStringIncludes, assertThrows } from "../../../tests/assert.ts";
import { findWireguardGo, kernelWireguard, startWireguardGo, WgDeviceError } from "./userspace.ts";

Deno.test("kernelWireguard: the loaded module, modules.dep or modules.builtin; else none", () => {
  const root = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${root}/proc/sys/kernel`, { recursive: true });
    Deno.writeTextFileSync(`${root}/proc/sys/kernel/osrelease`, "6.1.0-test\n");
    Deno.mkdirSync(`${root}/lib/modules/6.1.0-test`, { recursive: true });
    Deno.writeTextFileSync(`${root}/lib/modules/6.1.0-test/modules.dep`, "kernel/net/vxlan/vxlan.ko:\n");
    assertEquals(kernelWireguard(root), false);
    Deno.writeTextFileSync(
      `${root}/lib/modules/6.1.0-test/modules.dep`,
      "kernel/drivers/net/wireguard/wireguard.ko: kernel/net/ipv4/udp_tunnel.ko\n",
    );
    assertEquals(kernelWireguard(root), true);
    Deno.removeSync(`${root}/lib/modules/6.1.0-test/modules.dep`);
    Deno.writeTextFileSync(
      `${root}/lib/modules/6.1.0-test/modules.builtin`,
      "kernel/drivers/net/wireguard/wireguard.ko\n",
    );
    assertEquals(kernelWireguard(root), true);
    Deno.removeSync(`${root}/lib/modules/6.1.0-test/modules.builtin`);
    Deno.mkdirSync(`${root}/sys/module/wireguard`, { recursive: true });
    assertEquals(kernelWireguard(root), true);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test("findWireguardGo: FLANCTL_WIREGUARD_GO (only if executable), else PATH", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const prog = `${dir}/wireguard-go`;
    Deno.writeTextFileSync(prog, "#!/bin/sh\n");
    assertEquals(findWireguardGo({ PATH: dir }), null, "not executable");
    Deno.chmodSync(prog, 0o755);
    assertEquals(findWireguardGo({ PATH: `/nonexistent:${dir}` }), prog);
    assertEquals(findWireguardGo({ FLANCTL_WIREGUARD_GO: prog, PATH: "" }), prog);
    assertEquals(findWireguardGo({ FLANCTL_WIREGUARD_GO: `${dir}/nope`, PATH: dir }), null);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("startWireguardGo: a failing program's message, bounded, without its banner", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const prog = `${dir}/wireguard-go`;
    Deno.writeTextFileSync(
      prog,
      "#!/bin/sh\necho '┌───┐' >&2\necho \"$0 $1 OTHER=$(env | grep -v -e ^PATH= -e ^PWD= -e ^SHLVL= -e ^_= | wc -l)\" >&2\necho 'Failed to create TUN device: no /dev/net/tun' >&2\nexit 1\n",
    );
    Deno.chmodSync(prog, 0o755);
    const e = assertThrows(() => startWireguardGo(prog, "flannel-wg"), WgDeviceError);
    assertStringIncludes(e.message, "exit 1");
    assertStringIncludes(e.message, "Failed to create TUN device");
    assert(!e.message.includes("┌"), e.message);
    // Only the device name on its command line; an environment of PATH alone (sh adds PWD).
    assertStringIncludes(e.message, "flannel-wg OTHER=0");
    Deno.writeTextFileSync(prog, "#!/bin/sh\nexit 0\n");
    startWireguardGo(prog, "flannel-wg");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
