/**
 * `flanctl doctor --bundle FILE.tar.gz`: what a maintainer asks for in a bug report, in one archive —
 * the doctor report, `flanctl status`, the kernel state (`inspect all`), iptables/nft rules, subnet.env,
 * the daemon's state file, the CNI configs, the daemon log tail and versions — with secrets redacted:
 * known secret values (etcd password, kube tokens) are replaced wherever they appear, token/password
 * fields, bearer headers, URL credentials and PEM private keys by pattern; key files are never copied.
 * Only files that parse as what they should be are copied (subnet.env, the state file, CNI configs and
 * kubeconfigs); for any other a note says why not, without its content (a symlink pointing outside its
 * directory is not read at all: lib/base/capped_read.ts).
 * The archive is written by the system `tar` (as iptables-save is run): no archive code of our own.
 * @module
 */
import type { NodeSnapshot } from "../observe/snapshot.ts";
import type { DoctorReport } from "../doctor/types.ts";
import { renderJson } from "../doctor/render.ts";
import { nodeStatus } from "../status/status.ts";
import { openNetlink } from "../netlink/mod.ts";
import { listVethPairs } from "../observe/veths.ts";
import { allTables } from "../inspect/render.ts";
import {
  addrView,
  fdbView,
  linkNames,
  linkView,
  neighView,
  routeView,
  sortFdb,
  sortNeigh,
  vethView,
} from "../inspect/views.ts";
import { daemonStatePath } from "../node/daemon_state.ts";
import { VERSION } from "../base/version.ts";
import { FlanctlError } from "../base/errors.ts";
import { runProcess } from "../base/run.ts";
import { readCappedText } from "../base/capped_read.ts";
import { isObj } from "../base/json.ts";
import { parseSubnetEnv } from "../node/subnet_env.ts";

/** What goes into the bundle besides the gathered context. */
export interface BundleOptions {
  /** The archive to write (.tar.gz). */
  file: string;
  /** Daemon log file to tail, or null for `journalctl -u flanctl`. */
  logFile: string | null;
  /** Secret values to redact wherever they appear (etcd password, tokens). */
  secrets: string[];
  /** Display name of the node. */
  node: string;
}

/** The bundle could not be written. */
export class BundleError extends FlanctlError {
  constructor(file: string, detail: string) {
    super(`--bundle ${file}: ${detail}`, 1);
  }
}

const REDACTED = "<redacted>";

/** Replaces secrets in `text`: the known values, and token/password fields, bearer headers, URL credentials, PEM keys. */
export function redact(text: string, secrets: string[]): string {
  let t = text;
  for (const s of [...secrets].filter((s) => s.length >= 4).sort((a, b) => b.length - a.length)) {
    t = t.replaceAll(s, REDACTED);
  }
  return t
    .replace(
      /-----BEGIN ([A-Z ]*)PRIVATE KEY-----[\s\S]*?(-----END \1PRIVATE KEY-----|$)/g,
      `${REDACTED} private key`,
    )
    .replace(/(Bearer\s+)[A-Za-z0-9._~+/=-]+/gi, `$1${REDACTED}`)
    .replace(
      /("(?:token|password|passwd|secret|client-key-data|etcdPassword|bearerToken)"\s*:\s*)"(?:[^"\\]|\\.)*"/gi,
      `$1"${REDACTED}"`,
    )
    .replace(
      /^(\s*-?\s*(?:token|password|passwd|secret|client-key-data|auth-token)\s*:\s*)(?!<redacted>)\S.*$/gim,
      `$1${REDACTED}`,
    )
    .replace(/(--?(?:etcd-)?password(?:-file)?[= ])\S+/gi, `$1${REDACTED}`)
    .replace(/([A-Z_]*(?:PASSWORD|TOKEN|SECRET)[A-Z_]*=)\S+/g, `$1${REDACTED}`)
    .replace(/(\/\/[^/\s:@]+:)[^@\s/]+@/g, `$1${REDACTED}@`);
}

/** Token values of a kubeconfig (`token:` lines), to redact them everywhere. */
export function kubeconfigTokens(text: string): string[] {
  return [...text.matchAll(/^\s*token\s*:\s*["']?([^"'\s]+)["']?\s*$/gm)].map((m) => m[1]);
}

/** A file's text (capped, regular files only); null when missing, a note when refused. */
function readText(path: string, max = 1 << 20): string | null {
  try {
    return readCappedText(path, max);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    return `# ${path}: ${(e as Error).message}\n`;
  }
}

/**
 * A file's text when it parses as what it should be (`parses` returns an error, or null when it does);
 * otherwise a note saying why it was not copied — never the content of a file that did not parse (a
 * symlinked subnet.env pointing at /etc/shadow, a stray file in the CNI dir). null when missing.
 */
function parsedText(path: string, parses: (text: string) => string | null, max = 1 << 20): string | null {
  let text: string;
  try {
    text = readCappedText(path, max);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    return `# ${path}: not copied: ${(e as Error).message}\n`;
  }
  const why = parses(text);
  return why === null ? text : `# ${path}: not copied: ${why}\n`;
}

/** null when `text` is a valid subnet.env, else why not (errors quote at most a short excerpt). */
function subnetEnvError(text: string): string | null {
  try {
    parseSubnetEnv(text, "subnet.env");
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

/** null when `text` is a JSON object (a state file, a CNI config), else why not. */
function jsonObjectError(text: string): string | null {
  try {
    const v = JSON.parse(text);
    return isObj(v) ? null : "not a JSON object";
  } catch {
    return "not valid JSON";
  }
}

/** null when `text` is a CNI config (JSON object) or a kubeconfig (YAML: apiVersion, kind Config), else why not. */
function cniFileError(text: string): string | null {
  if (jsonObjectError(text) === null) return null;
  if (/^kind:\s*["']?Config["']?\s*$/m.test(text) && /^apiVersion:\s*\S/m.test(text)) return null;
  return "neither a CNI config (JSON) nor a kubeconfig";
}

/** Last `n` lines of `path`. */
function tail(path: string, n: number): string | null {
  try {
    const st = Deno.statSync(path);
    if (!st.isFile) return null; // a FIFO or device would block or never end
    const f = Deno.openSync(path);
    try {
      const size = Math.min(st.size, 1 << 20);
      f.seekSync(-size, Deno.SeekMode.End);
      const buf = new Uint8Array(size);
      let off = 0;
      while (off < size) {
        const r = f.readSync(buf.subarray(off));
        if (!r) break;
        off += r;
      }
      return new TextDecoder().decode(buf.subarray(0, off)).split("\n").slice(-n).join("\n");
    } finally {
      f.close();
    }
  } catch {
    return null;
  }
}

function isKeyFile(name: string, text: string | null): boolean {
  return /\.(key|pem|p12|pfx)$/i.test(name) || /PRIVATE KEY-----/.test(text ?? "");
}

/** Writes the bundle; returns the list of files it holds. */
export async function writeBundle(
  ctx: NodeSnapshot,
  report: DoctorReport,
  o: BundleOptions,
): Promise<string[]> {
  const tmp = Deno.makeTempDirSync({ prefix: "flanctl-bundle-" });
  const root = `${tmp}/flanctl-bundle`;
  const files: string[] = [];
  const put = (name: string, text: string | null) => {
    if (text === null) return;
    const p = `${root}/${name}`;
    Deno.mkdirSync(p.slice(0, p.lastIndexOf("/")), { recursive: true });
    Deno.writeTextFileSync(p, redact(text, o.secrets), { mode: 0o600 });
    files.push(name);
  };
  try {
    Deno.mkdirSync(root, { recursive: true });
    put("doctor.json", renderJson(report));
    try {
      put("status.json", JSON.stringify(await nodeStatus(ctx, o.node), null, 2) + "\n");
    } catch (e) {
      put("status.json", JSON.stringify({ error: (e as Error).message }) + "\n");
    }
    put("inspect.txt", await inspectAll(ctx));
    for (const d of [ctx.ipt.main, ctx.ipt.legacy, ctx.ipt.nft]) {
      put(`${d.cmd}.txt`, d.text ?? `# ${d.error}\n`);
    }
    const nft = await ctx.exec.run(["nft", "list", "ruleset"]);
    put(
      "nft-ruleset.txt",
      nft.code === 0 ? nft.stdout : `# nft list ruleset: ${nft.stderr.trim() || "not installed"}\n`,
    );
    put(
      "subnet.env",
      parsedText(ctx.opts.subnetFile, subnetEnvError) ?? `# ${ctx.opts.subnetFile}: missing\n`,
    );
    put("flanctl.json", parsedText(daemonStatePath(ctx.opts.subnetFile), jsonObjectError));
    cniConfigs(ctx.opts.cniConfDir, "", put);
    put("daemon.log", await daemonLog(ctx, o.logFile));
    put("versions.txt", await versions(ctx));
    put(
      "README.txt",
      `flanctl ${VERSION} bug-report bundle of node ${o.node}, ${new Date().toISOString()}.\n` +
        "Secrets are redacted (etcd password, kube tokens, bearer headers, URL credentials); private key " +
        "files are not included.\n",
    );
    const r = await runProcess(["tar", "-czf", o.file, "-C", tmp, "flanctl-bundle"])
      .catch((e: Error) => ({ code: 127, stderr: e.message }));
    if (r.code !== 0) throw new BundleError(o.file, `tar failed: ${r.stderr.trim()}`);
    return files.sort();
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
}

async function inspectAll(ctx: NodeSnapshot): Promise<string> {
  try {
    const h = openNetlink(ctx.opts.netns ? { name: ctx.opts.netns } : null);
    try {
      const links = h.links();
      const names = linkNames(links);
      const routes = h.routes();
      const neigh = h.neighbours();
      const pairs = await listVethPairs(ctx.opts.netns ? { netns: ctx.opts.netns } : {});
      return allTables({
        links: links.map((l) => linkView(l, names)),
        veths: pairs.map(vethView),
        addrs: h.addrs().map(addrView),
        routes: routes.map((r) => routeView(r, names)),
        neigh: sortNeigh(neigh.map((n) => neighView(n, routes))),
        fdb: sortFdb(h.fdb().map((f) => fdbView(f, names, neigh, routes))),
      }) + "\n";
    } finally {
      h.close();
    }
  } catch (e) {
    return `# inspect all failed: ${(e as Error).message}\n`;
  }
}

/** CNI config files (one level of subdirectories, e.g. flannel's kubeconfig dir); key files left out. */
function cniConfigs(dir: string, rel: string, put: (name: string, text: string | null) => void): void {
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(`${dir}${rel}`)];
  } catch {
    put("cni/MISSING.txt", `${dir}: not readable\n`);
    return;
  }
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const path = `${dir}${rel}/${e.name}`;
    if (e.isDirectory && !rel) cniConfigs(dir, `/${e.name}`, put);
    if (!e.isFile) continue;
    if (isKeyFile(e.name, readText(path, 256 * 1024))) {
      put(`cni${rel}/${e.name}.omitted`, "private key file: not included\n");
      continue;
    }
    put(`cni${rel}/${e.name}`, parsedText(path, cniFileError, 256 * 1024));
  }
}

async function daemonLog(ctx: NodeSnapshot, logFile: string | null): Promise<string> {
  if (logFile) return tail(logFile, 500) ?? `# ${logFile}: not readable\n`;
  const r = await ctx.exec.run(["journalctl", "-u", "flanctl", "-n", "500", "--no-pager"]);
  return r.code === 0
    ? r.stdout
    : `# journalctl -u flanctl: ${r.stderr.trim() || "not available"} (use --log-file)\n`;
}

async function versions(ctx: NodeSnapshot): Promise<string> {
  const line = async (argv: string[]) => {
    const r = await ctx.exec.run(argv);
    return `${argv.join(" ")}: ${
      r.code === 0 ? r.stdout.trim().split("\n")[0] : r.stderr.trim() || "not installed"
    }`;
  };
  return [
    `flanctl: ${VERSION}`,
    `deno: ${Deno.version.deno} (v8 ${Deno.version.v8}, typescript ${Deno.version.typescript})`,
    `kernel: ${readText("/proc/sys/kernel/osrelease")?.trim() ?? "?"}`,
    await line(["uname", "-a"]),
    await line(["iptables", "--version"]),
    await line(["nft", "--version"]),
    await line(["ip", "-V"]),
    `libnl: ${ctx.kernel?.source ?? ctx.kernelError ?? "?"}`,
  ].join("\n") + "\n";
}
