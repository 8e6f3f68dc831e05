/**
 * The table of our CNI plugins, loaded on demand so each call imports only what it runs. Importing this
 * module also hands the table to {@link usePlugins}, so a delegate that is one of ours runs in-process.
 * It sits above every plugin (they import lib/cni/delegate.ts, never this table), which keeps the CNI
 * layer free of import cycles.
 * @module
 */
import type { Plugin } from "./skel.ts";
import { type PluginTable, usePlugins } from "./delegate.ts";

/** Our plugins by CNI type name. */
export const PLUGINS: PluginTable = {
  flannel: async () => (await import("./flannel.ts")).plugin,
  bridge: async () => (await import("./bridge.ts")).plugin,
  "host-local": async () => (await import("./host_local.ts")).plugin,
  loopback: async () => (await import("./loopback.ts")).plugin,
  portmap: async () => (await import("./portmap.ts")).plugin,
} satisfies Record<string, () => Promise<Plugin>>;

usePlugins(PLUGINS);

/**
 * Our plugin named `type`, or undefined. Own keys only: a type such as `constructor` or `toString` must not
 * resolve on Object.prototype.
 */
export function ourPlugin(type: string): (() => Promise<Plugin>) | undefined {
  return Object.hasOwn(PLUGINS, type) ? PLUGINS[type] : undefined;
}
