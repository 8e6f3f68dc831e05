/**
 * CNI configuration: the file the runtime picks (the first by name in the conf dir), its JSON and
 * cniVersion, and the plugin binaries it needs.
 * @module
 */
import type { Check } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { CappedReadError, readCappedText } from "../../base/capped_read.ts";
import { isObj } from "../../base/json.ts";
import { CNI_PLUGIN_NAMES } from "../../cni/names.ts";

/** cniVersions the flanctl plugins (and the reference plugins) accept. */
export const SUPPORTED_CNI_VERSIONS = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/** The CNI config the runtime uses, parsed. */
export interface CniConfView {
  /** Config files in load order (libcni sorts by file name). */
  files: string[];
  /** The first file, or null. */
  first: string | null;
  /** Its parsed JSON, or null with `error`. */
  doc: Record<string, unknown> | null;
  error: string | null;
  /** True when the first file is not a regular file or is far too large (read refused, not parsed). */
  unreadable: boolean;
  /** Plugin objects (a .conf counts as a one-plugin list). */
  plugins: Record<string, unknown>[];
  /** The flannel plugin entry, if the first config has one. */
  flannel: Record<string, unknown> | null;
}

const cache = new WeakMap<NodeSnapshot, CniConfView>();

/** Reads the conf dir once per run. */
export function cniConf(ctx: NodeSnapshot): CniConfView {
  const hit = cache.get(ctx);
  if (hit) return hit;
  const dir = ctx.opts.cniConfDir;
  const v: CniConfView = {
    files: [],
    first: null,
    doc: null,
    error: null,
    unreadable: false,
    plugins: [],
    flannel: null,
  };
  try {
    v.files = [...Deno.readDirSync(dir)]
      .filter((e) => !e.isDirectory && /\.(conf|conflist|json)$/.test(e.name))
      .map((e) => e.name).sort();
  } catch (e) {
    v.error = `cannot read ${dir}: ${(e as Error).message}`;
  }
  v.first = v.files[0] ?? null;
  if (v.first) {
    const p = `${dir}/${v.first}`;
    try {
      const doc = JSON.parse(readCappedText(p));
      if (!isObj(doc)) throw new Error("not a JSON object");
      v.doc = doc;
      v.plugins = Array.isArray(doc.plugins)
        ? doc.plugins.filter((x: unknown) => typeof x === "object" && x)
        : [doc];
      v.flannel = v.plugins.find((p) => p.type === "flannel") ?? null;
    } catch (e) {
      v.error = e instanceof CappedReadError ? e.message : `${p}: ${(e as Error).message}`;
      v.unreadable = e instanceof CappedReadError;
    }
  }
  cache.set(ctx, v);
  return v;
}

/** cni-config: the first config is valid JSON, a supported cniVersion, and flannel's. */
export const cniConfig: Check = {
  id: "cni-config",
  title: "First CNI config is flannel's and valid",
  run(ctx) {
    const v = cniConf(ctx);
    const dir = ctx.opts.cniConfDir;
    const persist = [
      "keep only the flannel config in " + dir + " (e.g. 10-flannel.conflist), or give it the " +
      "lowest name",
    ];
    if (!v.first) {
      return [{
        id: "cni-config",
        severity: "critical",
        detail: v.error ?? `no .conf/.conflist/.json file in ${dir}`,
        why: 'kubelet reports "cni config uninitialized" and the node stays NotReady; no pod can start',
        fix: [`write ${dir}/10-flannel.conflist (see the flannel manifests)`],
        persist,
      }];
    }
    if (!v.doc && v.unreadable) {
      return [
        unknown("cni-config", `cannot read it: ${v.error}`, [`replace ${dir}/${v.first} by a regular file`]),
      ];
    }
    if (!v.doc) {
      return [{
        id: "cni-config",
        severity: "critical",
        detail: `${v.error}`,
        why: "the runtime cannot parse the config it picks: every pod start fails",
        fix: [`fix the JSON of ${dir}/${v.first} (check with: python3 -m json.tool ${dir}/${v.first})`],
        persist,
      }];
    }
    const ver = typeof v.doc.cniVersion === "string" ? v.doc.cniVersion : "0.1.0";
    if (!SUPPORTED_CNI_VERSIONS.includes(ver)) {
      return [{
        id: "cni-config",
        severity: "critical",
        detail: `${dir}/${v.first}: cniVersion "${ver}" is not supported (${
          SUPPORTED_CNI_VERSIONS.join(", ")
        })`,
        why: 'the plugins reject the config with "incompatible CNI versions" (kubernetes #100309)',
        fix: [`set "cniVersion": "0.3.1" (or "1.0.0") in ${dir}/${v.first}`],
        persist,
      }];
    }
    if (!v.flannel) {
      const types = v.plugins.map((p) => String(p.type)).join(", ");
      const flannelFile = v.files.slice(1).find((f) => isFlannelConfig(`${dir}/${f}`));
      return [{
        id: "cni-config",
        severity: "critical",
        detail:
          `the runtime uses ${dir}/${v.first} (plugins: ${types}), not a flannel config: it sorts first` +
          (flannelFile ? ` (before ${flannelFile})` : "") +
          (v.files.length > 1 ? `; other files: ${v.files.slice(1).join(", ")}` : ""),
        why: "the runtime takes only the first config by name: every pod is attached by that plugin, not " +
          "flannel — pods get no flannel subnet, routes or masquerade, or fail to start when that plugin is " +
          "not installed (a leftover of another CNI; flannel #1437)",
        fix: [`mkdir -p /root/cni-net.d.bak && mv ${dir}/${v.first} /root/cni-net.d.bak/`],
        persist,
      }];
    }
    return [
      ok(
        "cni-config",
        `${dir}/${v.first}: cniVersion ${ver}, plugins ${v.plugins.map((p) => p.type).join(", ")}`,
      ),
    ];
  },
};

/** Whether the config file at `path` holds a flannel plugin (false when unreadable). */
function isFlannelConfig(path: string): boolean {
  try {
    const doc = JSON.parse(readCappedText(path));
    const plugins = isObj(doc) && Array.isArray(doc.plugins) ? doc.plugins : [doc];
    return plugins.some((p: unknown) => isObj(p) && p.type === "flannel");
  } catch {
    return false;
  }
}

/** cni-binaries: every plugin the config needs exists and is executable in the bin dir. */
export const cniBinaries: Check = {
  id: "cni-binaries",
  title: "CNI plugin binaries present",
  run(ctx) {
    const v = cniConf(ctx);
    const need = new Set<string>(["loopback"]);
    for (const p of v.plugins) if (typeof p.type === "string") need.add(p.type);
    if (v.flannel) {
      const d = (v.flannel.delegate ?? {}) as Record<string, unknown>;
      need.add(typeof d.type === "string" ? d.type : "bridge");
      need.add("host-local");
    }
    if (!v.doc) ["flannel", "bridge", "host-local"].forEach((t) => need.add(t));
    const dir = ctx.opts.cniBinDir;
    const missing: string[] = [];
    for (const t of need) {
      try {
        const st = Deno.statSync(`${dir}/${t}`);
        if (!st.isFile || ((st.mode ?? 0o755) & 0o111) === 0) missing.push(`${t} (not executable)`);
      } catch {
        missing.push(t);
      }
    }
    if (!missing.length) return [ok("cni-binaries", `${[...need].join(", ")} present in ${dir}`)];
    const name = (m: string) => m.split(" ")[0];
    // flanctl serves only its own plugin names: a foreign plugin is never symlinked to it.
    const ours = missing.filter((m) => CNI_PLUGIN_NAMES.includes(name(m)));
    const foreign = missing.filter((m) => !CNI_PLUGIN_NAMES.includes(name(m)));
    if (!v.flannel && v.doc && !ours.length) {
      // The foreign config sorting first is the root cause (cni-config): its plugin's binary is a consequence.
      return [{
        id: "cni-binaries",
        severity: "warning",
        detail:
          `missing in ${dir}: ${missing.join(", ")} — needed only by ${ctx.opts.cniConfDir}/${v.first}, ` +
          "which is not flannel's (consequence of cni-config)",
        why:
          "the config that sorts first names a plugin that is not installed: fixing cni-config removes the need",
        fix: ["see cni-config"],
      }];
    }
    const fix: string[] = [];
    if (ours.length) {
      fix.push(
        `for p in ${ours.map(name).join(" ")}; do ln -sf "$(command -v flanctl)" ${dir}/$p; done` +
          "  # flanctl's own plugins",
      );
    }
    for (const m of foreign) {
      fix.push(
        `# ${name(m)} is not a flanctl plugin: install its binary into ${dir} (for the reference plugins: ` +
          "containernetworking/plugins releases), or remove it from the config",
      );
    }
    return [{
      id: "cni-binaries",
      severity: "critical",
      detail: `missing in ${dir}: ${missing.join(", ")}`,
      why: 'pod sandboxes fail with "failed to find plugin ... in path" (flannel #1730)',
      fix,
      persist: ["./install.sh installs the symlinks; ship them with the node image"],
    }];
  },
};

/** The checks of this family. */
export const CNI_CHECKS: Check[] = [cniConfig, cniBinaries];
