/**
 * The install-cni tests' scratch tree (lib/install/cni_test.ts, cni_upgrade_test.ts): a temp root with the
 * CNI bin and conf dirs under it and a flannel conflist to install, removed afterwards.
 * @module
 */

/** The conflist the tests install (flannel's, as the DaemonSet's cni-conf.json). */
export const CONFLIST = JSON.stringify({
  name: "cbr0",
  cniVersion: "0.3.1",
  plugins: [{ type: "flannel", delegate: { hairpinMode: true, isDefaultGateway: true } }],
});

/** The paths {@link withDirs} hands its body: the root, the bin and conf dirs (not made yet), the conflist. */
export interface InstallDirs {
  root: string;
  bin: string;
  conf: string;
  src: string;
}

/** Runs `fn` on a fresh scratch tree and removes it afterwards. */
export async function withDirs(fn: (d: InstallDirs) => Promise<void>): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "flanctl-install-" });
  try {
    Deno.writeTextFileSync(`${root}/cni-conf.json`, CONFLIST);
    await fn({
      root,
      bin: `${root}/opt/cni/bin`,
      conf: `${root}/etc/cni/net.d`,
      src: `${root}/cni-conf.json`,
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}
