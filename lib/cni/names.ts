/**
 * The names under which the flanctl binary acts as a CNI plugin (symlink mode, main.ts) and which
 * `flanctl install-cni` and install.sh put into the CNI bin dir. The one list: add a plugin here.
 * @module
 */

/** CNI plugin names the binary provides. */
export const CNI_PLUGIN_NAMES: readonly string[] = ["flannel", "bridge", "host-local", "loopback", "portmap"];
