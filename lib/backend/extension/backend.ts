/**
 * The extension backend (flannel pkg/backend/extension, v0.28.10): no device and no kernel entries; the
 * operator's commands run on the node's lease events instead, as flanneld runs them (./run.ts: no shell,
 * the daemon's environment plus flanneld's variables, a newline-terminated stdin):
 *
 * - `PreStartupCommand` before the lease is taken: no extra variables, stdin empty; its trimmed output is
 *   the lease's BackendData (a JSON string). A failure stops the start (flanneld exits too).
 * - `PostStartupCommand` once the lease is ours: NETWORK, SUBNET, IPV6SUBNET, PUBLIC_IP, PUBLIC_IPV6 (a
 *   family the network lacks as flanneld prints its zero value: `0.0.0.0/0`, `::/0`, `<nil>`). A failure
 *   stops the start.
 * - `SubnetAddCommand` / `SubnetRemoveCommand` for each `added` / `removed` event of another node's lease
 *   (./watcher.ts: flanneld's LeaseWatcher), one at a time in event order: SUBNET and PUBLIC_IP of that
 *   lease, its BackendData string on stdin. A lease of another BackendType is ignored with a warning, one
 *   whose BackendData is not a JSON string is skipped with an error; a failing command is logged as an
 *   error and the daemon goes on (as flanneld).
 *
 * flanctl adds a timeout per command and a cap on the output kept; output is logged escaped and bounded.
 * The lease's PublicIP is the interface's address (flanneld's extension takes IfaceAddr, not --public-ip).
 * @module
 */
import { FlanctlError } from "../../base/errors.ts";
import type { IPNet } from "../../base/cidr.ts";
import { IPAddr } from "../../base/cidr.ts";
import { safeText } from "../../base/capped_read.ts";
import type { Log } from "../../base/log.ts";
import type { Lease, LeaseAttrsWire, LeaseEvent } from "../../lease/types.ts";
import type { Backend, ExternalIface } from "../types.ts";
import { commandArgv } from "./expand.ts";
import type { CommandKey, ExtensionOptions } from "./options.ts";
import { type CommandResult, runExtensionCommand } from "./run.ts";
import { LeaseWatcher } from "./watcher.ts";

/** A command's default timeout (flanneld has none). */
export const DEFAULT_COMMAND_TIMEOUT_MS = 60_000;
/** The output of a command kept (bytes); PreStartupCommand's may not be longer (it becomes BackendData). */
export const MAX_OUTPUT_BYTES = 64 * 1024;
/** Characters of a command's output in a log line. */
const LOGGED_OUTPUT = 1000;

/** A start-up command failed (flanneld: "failed to run command: … Err: … Output: …", then exit). */
export class ExtensionCommandError extends FlanctlError {}

/** The outcome counts and the last run of one command, for /metrics and `status`. */
export interface CommandStats {
  ok: number;
  /** Ran and failed (not the timeouts). */
  failed: number;
  /** Killed at the timeout. */
  timedOut: number;
  /** Events skipped before a run (BackendData not a JSON string). */
  skipped: number;
  last: { at: number; ok: boolean; error: string | null } | null;
}

/** What {@link ExtensionBackend} is built with. */
export interface ExtensionBackendOptions {
  commands: ExtensionOptions;
  ext: ExternalIface;
  /** The network's families and IPv4 Network (NETWORK). */
  network: { v4: IPNet | null; enableIPv4: boolean; enableIPv6: boolean };
  log: Log;
  /** Per command (default {@link DEFAULT_COMMAND_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** The environment commands inherit and `$VAR` in them expands from (default: the daemon's). */
  environ?: () => Record<string, string>;
}

const v4Text = (n: IPNet | null | undefined) => n ? n.toString() : "0.0.0.0/0";
const v6Text = (n: IPNet | null | undefined) => n ? n.toString() : "::/0";

/** The extension backend. */
export class ExtensionBackend implements Backend {
  readonly type = "extension";
  readonly overlayDev = null;
  readonly mtu: number;
  readonly #o: ExtensionBackendOptions;
  #data: string | null = null;
  readonly #watcher = new LeaseWatcher();
  readonly #queue: LeaseEvent[] = [];
  #pump: Promise<void> | null = null;
  readonly #abort = new AbortController();
  readonly stats: Record<CommandKey, CommandStats>;

  constructor(o: ExtensionBackendOptions) {
    this.#o = o;
    this.mtu = o.ext.mtu;
    const s = (): CommandStats => ({ ok: 0, failed: 0, timedOut: 0, skipped: 0, last: null });
    this.stats = {
      PreStartupCommand: s(),
      PostStartupCommand: s(),
      SubnetAddCommand: s(),
      SubnetRemoveCommand: s(),
    };
  }

  #environ(): Record<string, string> {
    return (this.#o.environ ?? (() => Deno.env.toObject()))();
  }

  /** Runs command `key` with `vars` added to the environment and `stdin`; logs and counts the outcome. */
  async #run(key: CommandKey, vars: Record<string, string>, stdin: string): Promise<CommandResult> {
    const command = this.#o.commands[key]!;
    const env = { ...this.#environ(), ...vars };
    const r = await runExtensionCommand(commandArgv(command, env), {
      env,
      stdin,
      timeoutMs: this.#o.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      maxOutputBytes: MAX_OUTPUT_BYTES,
      signal: this.#abort.signal,
    });
    const st = this.stats[key];
    st.last = { at: Date.now(), ok: r.ok, error: r.error };
    if (r.ok) st.ok++;
    else if (r.timedOut) st.timedOut++;
    else st.failed++;
    const fields = {
      command: key,
      cmd: safeText(command, 200),
      ms: r.ms,
      output: safeText(r.output, LOGGED_OUTPUT),
      output_truncated: r.truncated || undefined,
    };
    if (r.ok) this.#o.log.info("ran command", fields);
    else this.#o.log.error("failed to run command", { ...fields, error: safeText(r.error ?? "", 300) });
    return r;
  }

  /** Throws flanneld's start-up failure for `key`'s result. */
  #fatal(key: CommandKey, r: CommandResult): never {
    throw new ExtensionCommandError(
      `${key}: failed to run command: ${safeText(this.#o.commands[key]!, 200)} Err: ${
        safeText(r.error ?? "", 300)
      } Output: ${safeText(r.output, LOGGED_OUTPUT)}`,
    );
  }

  /** Runs PreStartupCommand (its output becomes BackendData). */
  async prepare(): Promise<void> {
    if (!this.#o.commands.PreStartupCommand) {
      this.#o.log.info("no pre startup command configured: skipping");
      return;
    }
    const r = await this.#run("PreStartupCommand", {}, "");
    if (!r.ok) this.#fatal("PreStartupCommand", r);
    if (r.truncated) {
      throw new ExtensionCommandError(
        `PreStartupCommand: its output is longer than ${MAX_OUTPUT_BYTES} bytes (it becomes the lease's ` +
          "BackendData): print less",
      );
    }
    this.#data = r.output;
  }

  /** PreStartupCommand's output as a JSON string, or null (no BackendData, as flanneld's empty one). */
  backendData(): string | null {
    return this.#data;
  }

  /** flanneld's extension attributes: BackendType "extension", the interface's own addresses. */
  leaseAttrs(a: LeaseAttrsWire): LeaseAttrsWire {
    const { ext, network } = this.#o;
    return {
      ...a,
      PublicIP: network.enableIPv4 && ext.ifaceIP ? ext.ifaceIP : a.PublicIP,
      PublicIPv6: network.enableIPv6 ? ext.ifaceIPv6 ?? null : null,
    };
  }

  /** Runs PostStartupCommand for our lease `l` (a failure stops the start). */
  async leased(l: Lease): Promise<void> {
    if (!this.#o.commands.PostStartupCommand) {
      this.#o.log.info("no post startup command configured: skipping");
      return;
    }
    const r = await this.#run("PostStartupCommand", {
      NETWORK: v4Text(this.#o.network.v4),
      SUBNET: v4Text(l.subnet),
      IPV6SUBNET: v6Text(l.ipv6Subnet),
      PUBLIC_IP: l.attrs.PublicIP || "0.0.0.0",
      PUBLIC_IPV6: l.attrs.PublicIPv6 ?? "<nil>",
    }, "");
    if (!r.ok) this.#fatal("PostStartupCommand", r);
  }

  ensure(_own: IPNet): string[] {
    return [];
  }

  /** No kernel entries for any peer. */
  peer(): null {
    return null;
  }

  /** A full listing of the other nodes' leases. */
  leasesListed(others: readonly Lease[]): void {
    this.#enqueue(this.#watcher.reset(others));
  }

  /** One watched event of another node's lease. */
  leaseEvent(ev: LeaseEvent): void {
    this.#enqueue([this.#watcher.update(ev)]);
  }

  #enqueue(evs: LeaseEvent[]): void {
    if (this.#abort.signal.aborted) return;
    this.#queue.push(...evs);
    this.#pump ??= this.#drain().finally(() => this.#pump = null);
  }

  async #drain(): Promise<void> {
    while (this.#queue.length && !this.#abort.signal.aborted) await this.#handle(this.#queue.shift()!);
  }

  /** Resolves once every queued event has been handled. */
  async idle(): Promise<void> {
    while (this.#pump) await this.#pump;
  }

  async #handle(ev: LeaseEvent): Promise<void> {
    const l = ev.lease, log = this.#o.log;
    const subnet = v4Text(l.subnet), publicIP = IPAddr.tryParse(l.attrs.PublicIP)?.toString() ?? "0.0.0.0";
    const added = ev.type === "added";
    log.info(added ? "subnet added" : "subnet removed", { subnet, public_ip: publicIP });
    if (l.attrs.BackendType !== "extension") {
      log.warn("ignoring non-extension subnet", { subnet, type: safeText(l.attrs.BackendType, 40) });
      return;
    }
    const key: CommandKey = added ? "SubnetAddCommand" : "SubnetRemoveCommand";
    if (!this.#o.commands[key]) return;
    const bd = l.attrs.BackendData;
    if (bd !== undefined && bd !== null && typeof bd !== "string") {
      this.stats[key].skipped++;
      log.error("failed to unmarshal BackendData: not a JSON string", { subnet, command: key });
      return;
    }
    await this.#run(key, { SUBNET: subnet, PUBLIC_IP: publicIP }, bd ?? "");
  }

  /** The commands' outcomes for /metrics. */
  metricLines(): string[] {
    const out = [
      "# HELP flanctl_extension_commands_total Extension backend commands by command and result " +
      "(skipped: BackendData not a JSON string).",
      "# TYPE flanctl_extension_commands_total counter",
    ];
    for (const [k, s] of Object.entries(this.stats)) {
      for (
        const [res, n] of [["ok", s.ok], ["failed", s.failed], ["timeout", s.timedOut], [
          "skipped",
          s.skipped,
        ]]
      ) {
        out.push(`flanctl_extension_commands_total{command="${k}",result="${res}"} ${n}`);
      }
    }
    out.push(
      "# HELP flanctl_extension_command_last_run_timestamp_seconds When each command last ran, by its result.",
      "# TYPE flanctl_extension_command_last_run_timestamp_seconds gauge",
    );
    for (const [k, s] of Object.entries(this.stats)) {
      if (!s.last) continue;
      out.push(
        `flanctl_extension_command_last_run_timestamp_seconds{command="${k}",result="${
          s.last.ok ? "ok" : "failed"
        }"} ${Math.floor(s.last.at / 1000)}`,
      );
    }
    return out;
  }

  /** Stops: the running command is killed, queued events are dropped. */
  async close(): Promise<void> {
    this.#abort.abort();
    this.#queue.length = 0;
    await this.#pump;
  }
}
