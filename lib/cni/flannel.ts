/**
 * The flannel meta plugin: reads subnet.env, renders the delegate config exactly as flannel's CNI plugin
 * does (type bridge unless the `delegate` says otherwise, ipMasq = !FLANNEL_IPMASQ, mtu = FLANNEL_MTU,
 * isGateway for bridge, host-local IPAM over the node subnet with a route to the cluster network), saves it
 * as `<dataDir>/<containerID>` for DEL, and runs the delegate (in-process when it is one of ours). As flannel's
 * plugin it copies the runtime's `runtimeConfig` into the delegate, CHECK always succeeds, and GC without
 * an attachment list does nothing; STATUS fails only while subnet.env is missing (the daemon is not up).
 * @module
 */
import { isObj } from "../base/json.ts";
import { DEFAULT_SUBNET_FILE, readSubnetEnv, type SubnetEnv, SubnetEnvError } from "../node/subnet_env.ts";
import { lockDir, withContainerLock } from "./container_lock.ts";
import { delegate } from "./delegate.ts";
import { deleteOrphanVeth } from "./orphan.ts";
import { type CniResult, parseResult } from "./result.ts";
import type { Plugin, PluginCall } from "./skel.ts";
import { type CmdArgs, CniError, configError, ErrCode } from "./spec.ts";
import { CappedReadError, checkNsFile, readCappedText } from "../base/capped_read.ts";
import { NET_CONF, type Shape } from "./gojson.ts";

/** Default directory of saved delegate configs, as flannel. */
export const DEFAULT_DATA_DIR = "/var/lib/cni/flannel";

/** The flannel plugin's own config. */
export interface FlannelConf {
  name: string;
  cniVersion: string;
  subnetFile: string;
  dataDir: string;
  delegate: Record<string, unknown>;
  ipam: Record<string, unknown> | null;
  /** The runtime's `runtimeConfig` (capabilities: ips, mac, portMappings, bandwidth, …), or null. */
  runtimeConfig: Record<string, unknown> | null;
}

const cfgErr: (details: string) => never = configError("invalid flannel config");

/** Parses the flannel config and checks the delegate section. */
export function loadFlannelConf(c: Record<string, unknown>): FlannelConf {
  const str = (k: string, def: string) => {
    const v = c[k];
    if (v === undefined || v === null || v === "") return def;
    if (typeof v !== "string") cfgErr(`'${k}' must be a string path`);
    return v;
  };
  const d = c.delegate ?? {};
  if (!isObj(d)) cfgErr("'delegate' must be an object");
  if ("name" in d) cfgErr("'name' field is invalid in delegate");
  if ("ipam" in d) cfgErr("'ipam' field is invalid in delegate");
  if (d.type !== undefined && typeof d.type !== "string") cfgErr("'delegate.type' must be a string");
  if (c.ipam !== undefined && c.ipam !== null && !isObj(c.ipam)) cfgErr("'ipam' must be an object");
  return {
    name: c.name as string,
    cniVersion: typeof c.cniVersion === "string" ? c.cniVersion : "",
    subnetFile: str("subnetFile", DEFAULT_SUBNET_FILE),
    dataDir: str("dataDir", DEFAULT_DATA_DIR),
    delegate: structuredClone(d),
    ipam: isObj(c.ipam) ? structuredClone(c.ipam) : null,
    runtimeConfig: isObj(c.runtimeConfig) ? structuredClone(c.runtimeConfig) : null,
  };
}

/**
 * Reads subnet.env; a missing/bad file is error 7 naming the file and variable, in flannel's plugin's
 * wording (`loadFlannelSubnetEnv failed: open <path>: no such file or directory`, as kubelet events show it).
 */
export function loadSubnetEnv(path: string): SubnetEnv {
  try {
    return readSubnetEnv(path);
  } catch (e) {
    if (!(e instanceof SubnetEnvError)) throw e;
    if (e.cause instanceof Deno.errors.NotFound) {
      throw new CniError(
        ErrCode.InvalidNetworkConfig,
        `loadFlannelSubnetEnv failed: open ${path}: no such file or directory`,
        "the flanctl/flannel daemon writes it once it holds a lease: is it running on this node?",
      );
    }
    throw new CniError(ErrCode.InvalidNetworkConfig, `loadFlannelSubnetEnv failed: ${e.message}`);
  }
}

/** Builds the delegate config as flannel's plugin does (keys sorted, as Go marshals a map). */
export function buildDelegate(n: FlannelConf, env: SubnetEnv): Record<string, unknown> {
  const d = structuredClone(n.delegate);
  // As flannel's plugin: the runtime's runtimeConfig goes to the delegate as is (static IP/MAC, port
  // mappings, bandwidth through capabilities), replacing any the delegate section had.
  if (n.runtimeConfig) d.runtimeConfig = structuredClone(n.runtimeConfig);
  d.name = n.name;
  if (!("type" in d)) d.type = "bridge";
  if (!("ipMasq" in d)) d.ipMasq = !env.ipMasq;
  if (!("mtu" in d)) d.mtu = env.mtu;
  if (d.type === "bridge" && !("isGateway" in d)) d.isGateway = true;
  if (n.cniVersion) d.cniVersion = n.cniVersion;
  const ipam: Record<string, unknown> = n.ipam ?? {};
  if (!("type" in ipam)) ipam.type = "host-local";
  const ranges: { subnet: string }[][] = [];
  if (env.subnet) ranges.push([{ subnet: env.subnet.net.toString() }]);
  if (env.ipv6Subnet) ranges.push([{ subnet: env.ipv6Subnet.net.toString() }]);
  ipam.ranges = ranges;
  const routes: unknown[] = [];
  if (Array.isArray(ipam.routes)) routes.push(...ipam.routes);
  if (env.network) routes.push({ dst: env.network.toString() });
  if (env.ipv6Network) routes.push({ dst: env.ipv6Network.toString() });
  ipam.routes = routes;
  d.ipam = ipam;
  return sortKeys(d) as Record<string, unknown>;
}

/** Recursively sorts object keys (Go's encoding of map[string]interface{}). */
export function sortKeys(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(sortKeys);
  if (!isObj(x)) return x;
  const o: Record<string, unknown> = {};
  for (const k of Object.keys(x).sort()) o[k] = sortKeys(x[k]);
  return o;
}

function savedPath(dataDir: string, containerId: string): string {
  return `${dataDir}/${containerId}`;
}

function save(dataDir: string, containerId: string, text: string): void {
  // The temp file has a short name of its own (a 255-character container ID leaves no room for a suffix)
  // in a sub-directory, so GC never takes it for a saved config.
  Deno.mkdirSync(`${dataDir}/.tmp`, { recursive: true, mode: 0o700 });
  const tmp = `${dataDir}/.tmp/${Deno.pid}.${crypto.randomUUID().slice(0, 8)}`;
  Deno.writeTextFileSync(tmp, text, { mode: 0o600 });
  Deno.renameSync(tmp, savedPath(dataDir, containerId));
}

function readSaved(dataDir: string, containerId: string): string | null {
  try {
    return readCappedText(savedPath(dataDir, containerId), 1024 * 1024);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw new CniError(ErrCode.IOFailure, "failed to read saved delegate config", (e as Error).message);
  }
}

function remove(dataDir: string, containerId: string): void {
  try {
    Deno.removeSync(savedPath(dataDir, containerId));
  } catch { /* gone */ }
}

/** CNI_NETNS must name a namespace file (not a FIFO, device or directory); error 4 otherwise. */
function checkNetns(netns: string): void {
  try {
    checkNsFile(netns);
  } catch (e) {
    if (e instanceof CappedReadError) throw new CniError(ErrCode.InvalidEnv, "invalid CNI_NETNS", e.message);
    // A missing netns is the delegate's to report (error 3), as before.
  }
}

function delegateType(text: string): string {
  try {
    const t = JSON.parse(text)?.type;
    if (typeof t === "string" && t) return t;
  } catch { /* fall through */ }
  throw new CniError(ErrCode.DecodingFailure, "saved delegate config is corrupt", "no string 'type'");
}

async function add(c: PluginCall): Promise<CniResult> {
  const n = loadFlannelConf(c.conf);
  const env = loadSubnetEnv(n.subnetFile);
  const d = buildDelegate(n, env);
  const text = JSON.stringify(d);
  const id = c.args.containerId;
  checkNetns(c.args.netns); // before anything is saved: a FIFO here would hang the delegate
  if (new TextEncoder().encode(id).length > 255) {
    // The saved config is named by the ID, as flannel's: a longer one cannot be a file name.
    throw new CniError(ErrCode.InvalidEnv, "invalid containerID", `${id.length} characters; at most 255`);
  }
  Deno.mkdirSync(n.dataDir, { recursive: true, mode: 0o700 });
  // Duplicate ADDs (runtime retries) and DELs of this container wait here: read, save, delegate and
  // restore are one step, so a failing duplicate never removes the config the winning ADD saved.
  return await withContainerLock(n.dataDir, id, async (lock) => {
    // A failed ADD must not lose the config of an attachment that already exists (a duplicate ADD).
    const previous = readSaved(n.dataDir, id);
    save(n.dataDir, id, text);
    try {
      let out: Awaited<ReturnType<typeof delegate>>;
      try {
        out = await delegate(d.type as string, "ADD", text, c.args);
      } catch (e) {
        // flannel's plugin's wording: `failed to delegate add: <the delegate's error>`.
        throw e instanceof CniError ? new CniError(e.code, `failed to delegate add: ${e.msg}`, e.details) : e;
      }
      return parseResult(out, c.version);
    } catch (e) {
      // The delegate undid its own work; without a saved config a later DEL would be a no-op, which is
      // right. Only what this call wrote is put back or removed.
      if (readSaved(n.dataDir, id) === text) {
        if (previous !== null) save(n.dataDir, id, previous);
        else {
          remove(n.dataDir, id);
          lock.discard();
        }
      }
      throw e;
    }
  });
}

/**
 * The config for DEL: as ADD reads it, or, when ADD would refuse it (DEL never fails on input its ADD
 * refused), the data directory and delegate when well-formed, else their defaults.
 */
function loadForDel(c: Record<string, unknown>): FlannelConf {
  try {
    return loadFlannelConf(c);
  } catch (e) {
    if (!(e instanceof CniError)) throw e;
    return {
      name: c.name as string,
      cniVersion: "",
      subnetFile: DEFAULT_SUBNET_FILE,
      dataDir: typeof c.dataDir === "string" && c.dataDir ? c.dataDir : DEFAULT_DATA_DIR,
      delegate: isObj(c.delegate) ? c.delegate : {},
      ipam: null,
      runtimeConfig: null,
    };
  }
}

async function del(c: PluginCall): Promise<void> {
  const n = loadForDel(c.conf);
  const id = c.args.containerId;
  if (readSaved(n.dataDir, id) === null) {
    // Already deleted or never added (success, as the spec asks) — or released by GC, which cannot reach
    // the pod's netns: remove the interface there when it is our bridge's veth.
    const type = typeof n.delegate.type === "string" ? n.delegate.type : "bridge";
    const bridge = typeof n.delegate.bridge === "string" && n.delegate.bridge ? n.delegate.bridge : "cni0";
    if (type === "bridge") await deleteOrphanVeth(c.args.netns, c.args.ifname, bridge);
    return;
  }
  await withContainerLock(n.dataDir, id, async (lock) => {
    const text = readSaved(n.dataDir, id);
    if (text === null) return lock.discard(); // a concurrent DEL finished first
    await delegate(delegateType(text), "DEL", text, c.args);
    remove(n.dataDir, id);
    lock.discard();
  });
}

/**
 * CHECK succeeds, as flannel's plugin (its CHECK is a no-op): a node taken over from flanneld must never
 * see a container fail CHECK that flannel would pass (the skeleton has already validated the call).
 */
function check(_c: PluginCall): Promise<void> {
  return Promise.resolve();
}

async function status(c: PluginCall): Promise<void> {
  const n = loadFlannelConf(c.conf);
  try {
    Deno.statSync(n.subnetFile);
  } catch {
    throw new CniError(
      ErrCode.PluginNotAvailable,
      "flannel is not ready",
      `${n.subnetFile} not found: is the flanctl/flannel daemon running on this node?`,
    );
  }
  let env: SubnetEnv;
  try {
    env = readSubnetEnv(n.subnetFile);
  } catch (e) {
    throw new CniError(ErrCode.PluginNotAvailable, "flannel is not ready", (e as Error).message);
  }
  const d = buildDelegate(n, env);
  if (c.version) d.cniVersion = c.version;
  await delegate(d.type as string, "STATUS", JSON.stringify(d), c.args);
}

async function gc(c: PluginCall): Promise<void> {
  const n = loadFlannelConf(c.conf);
  const raw = c.conf["cni.dev/valid-attachments"] ?? c.conf["cni.dev/attachments"];
  // Without the list GC would remove every saved config on the node: do nothing (flannel's GC is a no-op,
  // and GC must not fail on a healthy node).
  if (!Array.isArray(raw)) return;
  const valid = new Set(raw.map((a) => (isObj(a) ? String(a.containerID) : "")));
  // Saved configs of containers that are gone: run the delegate's DEL-free cleanup via its GC below.
  removeDeadTemps(n.dataDir);
  for (const name of staleNames(n.dataDir, valid)) {
    await withContainerLock(n.dataDir, name, (lock) => {
      remove(n.dataDir, name);
      lock.discard();
      return Promise.resolve();
    });
  }
  let env: SubnetEnv;
  try {
    env = readSubnetEnv(n.subnetFile);
  } catch {
    return; // without subnet.env there is no delegate config to collect for
  }
  const d = buildDelegate(n, env);
  d["cni.dev/valid-attachments"] = raw;
  d.cniVersion = c.version;
  await delegate(d.type as string, "GC", JSON.stringify(d), gcArgs(c.args));
}

/** Removes temp files of saves whose process is gone (an ADD killed between write and rename). */
function removeDeadTemps(dataDir: string): void {
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(`${dataDir}/.tmp`)];
  } catch {
    return;
  }
  for (const e of entries) {
    const pid = Number(e.name.split(".")[0]);
    if (!e.isFile || !Number.isInteger(pid) || pid <= 0) continue;
    try {
      Deno.statSync(`/proc/${pid}`);
      continue; // still running: its save may be in flight
    } catch { /* gone */ }
    try {
      Deno.removeSync(`${dataDir}/.tmp/${e.name}`);
    } catch { /* raced with another GC */ }
  }
}

/** Containers with a saved config or a lock file in `dataDir` that are not in `valid`. */
function staleNames(dataDir: string, valid: Set<string>): string[] {
  const out = new Set<string>();
  for (const dir of [dataDir, lockDir(dataDir)]) {
    try {
      for (const e of Deno.readDirSync(dir)) {
        if (e.isFile && !valid.has(e.name)) out.add(e.name);
      }
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
  return [...out];
}

function gcArgs(a: CmdArgs): CmdArgs {
  return { ...a, containerId: "", ifname: "", netns: "" };
}

/** The plugin. */
/**
 * flannel's NetConf: types.NetConf with `ipam`, `delegate` and `runtimeConfig` as maps (their keys are passed
 * on as sent; the delegate matches them), `subnetFile` and `dataDir`.
 */
const FLANNEL_SHAPE: Shape = {
  ...NET_CONF,
  ipam: null,
  delegate: null,
  runtimeConfig: null,
  subnetFile: null,
  dataDir: null,
};

/** The plugin. */
export const plugin: Plugin = { shape: FLANNEL_SHAPE, add, del, check, status, gc };
