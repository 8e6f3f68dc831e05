/**
 * The userspace way to a WireGuard device ({@link UserspaceDriver}): wireguard-go, a userspace program
 * (golang.zx2c4.com/wireguard; `install.sh --dev` builds it, an image may carry it; never bundled), used
 * where the kernel has no WireGuard (this machine's case) or when FLANCTL_WIREGUARD_WAY=userspace
 * (choose.ts). wireguard-go makes a TUN device of the name it is given, serves the UAPI at
 * /var/run/wireguard/<name>.sock (uapi.ts: key, port, peers), and keeps running after the daemon exits (so
 * a daemon restart loses no packet); deleting the device ends it.
 * @module
 */
import { FlanctlError } from "../../base/errors.ts";
import { safeText } from "../../base/capped_read.ts";
import type { NetlinkHandle } from "../../netlink/mod.ts";
import { type DeviceSet, type DeviceState, uapiGet, uapiSet } from "./uapi.ts";
import type { WgDriver } from "./driver.ts";

/** The environment variable naming the wireguard-go binary (else `wireguard-go` on PATH). */
export const WIREGUARD_GO_ENV = "FLANCTL_WIREGUARD_GO";

/** The userspace device could not be started. */
export class WgDeviceError extends FlanctlError {}

function isExecutable(path: string): boolean {
  try {
    const st = Deno.statSync(path);
    return st.isFile && ((st.mode ?? 0) & 0o111) !== 0;
  } catch {
    return false;
  }
}

/** The wireguard-go binary: FLANCTL_WIREGUARD_GO when set, else `wireguard-go` on PATH; null when none. */
export function findWireguardGo(
  env: Record<string, string | undefined> = Deno.env.toObject(),
): string | null {
  const set = env[WIREGUARD_GO_ENV];
  if (set) return isExecutable(set) ? set : null;
  for (const d of (env.PATH ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").split(":")) {
    if (d && isExecutable(`${d}/wireguard-go`)) return `${d}/wireguard-go`;
  }
  return null;
}

/**
 * Whether this kernel has WireGuard: the module loaded (/sys/module/wireguard) or built for it
 * (modules.dep, modules.builtin). Said in the log line of a fallback to userspace (a module built but not
 * loadable); the choice itself tries the kernel (choose.ts).
 */
export function kernelWireguard(root = ""): boolean {
  try {
    Deno.statSync(`${root}/sys/module/wireguard`);
    return true;
  } catch { /* not loaded */ }
  let rel = "";
  try {
    rel = Deno.readTextFileSync(`${root}/proc/sys/kernel/osrelease`).trim();
  } catch {
    return false;
  }
  for (const f of ["modules.dep", "modules.builtin"]) {
    try {
      const text = Deno.readTextFileSync(`${root}/lib/modules/${rel}/${f}`);
      if (/(^|\/)wireguard\.ko/m.test(text)) return true;
    } catch { /* no such file */ }
  }
  return false;
}

/**
 * Starts wireguard-go for device `dev` and waits until it has made the device and its UAPI socket (it
 * forks itself into the background once both exist, and exits 0). Nothing secret is in its command line
 * or environment: the key goes over the UAPI afterwards.
 */
export function startWireguardGo(prog: string, dev: string): void {
  let out: Deno.CommandOutput;
  try {
    out = new Deno.Command(prog, {
      args: [dev],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      clearEnv: true,
      env: { PATH: Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin" },
    }).outputSync();
  } catch (e) {
    throw new WgDeviceError(`could not run ${prog}: ${(e as Error).message}`);
  }
  if (!out.success) {
    const said = new TextDecoder().decode(out.stderr.subarray(-2000)) +
      new TextDecoder().decode(out.stdout.subarray(-500));
    const lines = said.split("\n").filter((l) => l.trim() && !/[│┌└]/.test(l)).slice(-3).join("; ");
    throw new WgDeviceError(
      `${prog} ${dev} failed (exit ${out.code}): ${safeText(lines || "no message")}`,
    );
  }
}

/** wireguard-go's device, configured over its UAPI socket. */
export class UserspaceDriver implements WgDriver {
  readonly way = "userspace" as const;
  readonly dev: string;
  /** The wireguard-go binary. */
  readonly program: string;
  /** The UAPI socket. */
  readonly socket: string;
  readonly #nl: NetlinkHandle;
  readonly #start: (prog: string, dev: string) => void;

  constructor(
    nl: NetlinkHandle,
    dev: string,
    program: string,
    socket: string,
    start: (prog: string, dev: string) => void = startWireguardGo,
  ) {
    this.#nl = nl;
    this.dev = dev;
    this.program = program;
    this.socket = socket;
    this.#start = start;
  }

  /** Starts wireguard-go when the device is missing (or not its TUN: that one is deleted first). */
  ensureDevice(): string[] {
    const changes: string[] = [];
    const l = this.#nl.link(this.dev);
    if (l && l.kind === "tun") return changes;
    if (l) {
      this.#nl.deleteLink(this.dev);
      changes.push(`recreated (kind is ${l.kind ?? "none"}, not wireguard-go's tun)`);
    }
    this.#start(this.program, this.dev);
    if (!this.#nl.link(this.dev)) throw new WgDeviceError(`${this.dev} was started but cannot be found`);
    if (!changes.length) changes.push("created");
    return changes;
  }

  get(): Promise<DeviceState> {
    return uapiGet(this.socket);
  }

  configure(s: DeviceSet): Promise<void> {
    return uapiSet(this.socket, s);
  }

  close(): void {}
}
