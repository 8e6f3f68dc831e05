/**
 * The daemon itself: found through its state file (flanctl.json next to subnet.env), else by a process
 * scan of the checked namespace (flanneld or an older flanctl), and asked on its /healthz. A dead daemon
 * is the root cause of most other findings, so it is reported first and the others point to it.
 * @module
 */
import { httpGet } from "../../observe/http_get.ts";
import type { Check, CheckId, Finding, FindingId } from "../types.ts";
import { ok } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { daemonRunning, daemonStatePath, readDaemonState } from "../../node/daemon_state.ts";
import { scanForDaemon } from "../../observe/probes.ts";
import { flannelRemoved } from "./cni.ts";

/** Ids of findings a dead daemon explains (their why then names it). */
export const DAEMON_DEPENDENT: ReadonlySet<FindingId> = new Set<CheckId>([
  "readyz",
  "subnet-env",
  "flannel-device",
  "vtep-mac",
  "peer-routes",
  "peer-arp",
  "peer-fdb",
  "peer-entries",
  "masq-rules",
  "nft-rules",
  "forward-policy",
  "flannel-v6-device",
  "peers-v6",
  "ip6tables-masq",
  "lease-own",
  "lease-expiry",
  "cni0-address",
]);

function dead(ctx: NodeSnapshot, detail: string): Finding {
  return {
    id: "daemon",
    severity: "critical",
    detail,
    why: "nothing keeps this node's network in step with the cluster: routes, ARP/FDB entries and rules " +
      "for new or moved nodes are not programmed, the lease is not renewed and expires; most other " +
      "findings follow from this",
    fix: [
      "systemctl restart flanctl; journalctl -u flanctl -n 50",
      ...(ctx.opts.netns
        ? [`(lab) flanctl lab down/up, or restart the daemon in netns ${ctx.opts.netns}`]
        : []),
    ],
    persist: ["systemctl enable flanctl (Restart=always in the unit restarts a killed daemon)"],
  };
}

/** The HTTP status `url` answers with from inside the checked namespace ("000": none). */
export async function healthz(ctx: NodeSnapshot, url: string): Promise<string> {
  const r = await httpGet(ctx.opts.netns, url);
  return r.status === null ? "000" : String(r.status);
}

/** daemon: the daemon runs (state file pid alive, /healthz answers). */
export const daemonCheck: Check = {
  id: "daemon",
  title: "The flanctl daemon is running",
  async run(ctx) {
    const path = daemonStatePath(ctx.opts.subnetFile);
    let state;
    try {
      state = readDaemonState(path);
    } catch (e) {
      return [dead(ctx, `state file unreadable: ${(e as Error).message}`)];
    }
    if (!state) {
      const p = scanForDaemon(ctx);
      if (p) {
        return [ok("daemon", `pid ${p.pid} (${p.cmd}); no state file ${path} (flanneld or older flanctl)`)];
      }
      const removed = flannelRemoved(ctx);
      if (removed) {
        return [{
          id: "daemon",
          severity: "warning",
          detail:
            `no daemon runs here: no state file ${path} and no flanneld/flanctl daemon process — flannel ` +
            `looks removed from this node (${
              removed.join(", ")
            } in the CNI conf dir; consequence: see cni-config)`,
          why: "a node that no longer runs flannel needs no daemon; its leftover CNI config is the problem",
          fix: ["see cni-config; if this node should run flannel: systemctl start flanctl"],
        }];
      }
      return [dead(ctx, `no daemon runs here: no state file ${path} and no flanneld/flanctl daemon process`)];
    }
    const running = daemonRunning(state);
    if (running === false) {
      return [
        dead(
          ctx,
          `daemon pid ${state.pid} (started ${state.startedAt}) is not running; ${path} was left by a daemon ` +
            "that did not exit cleanly (killed or crashed)",
        ),
      ];
    }
    const other = running === null ? " in another pid namespace (a container)" : "";
    const since = `pid ${state.pid}${other}, version ${state.version}, up since ${state.startedAt}`;
    if (!state.health) {
      if (running) return [ok("daemon", `${since}; no health endpoint (--healthz-port 0)`)];
      // Neither the pid nor an endpoint can be checked from here: a daemon process in this netns will do.
      const p = scanForDaemon(ctx);
      if (p) return [ok("daemon", `${since}; found as pid ${p.pid} here (${p.cmd})`)];
      return [dead(ctx, `${since}, but no health endpoint to ask and no daemon process in this namespace`)];
    }
    const url = `http://${state.health}/healthz`;
    const code = await healthz(ctx, url);
    if (code === "200") return [ok("daemon", `${since}; ${url} → 200`)];
    if (running === null) {
      return [dead(ctx, `${since}: its pid cannot be checked from here and ${url} → ${code || "no answer"}`)];
    }
    return [{
      id: "daemon",
      severity: "critical",
      detail: `${since}, but ${url} → ${code === "000" || !code ? "no answer" : code}`,
      why: "the daemon process exists but does not serve: it is hung or stuck starting up",
      fix: ["journalctl -u flanctl -n 50; systemctl restart flanctl"],
    }];
  },
};

/**
 * When `daemon` is critical, the findings it explains say so in their why (root cause first). Returns
 * the findings with that note added.
 */
export function pointToDaemon(findings: Finding[]): Finding[] {
  if (!findings.some((f) => f.id === "daemon" && f.severity === "critical")) return findings;
  return findings.map((f) => {
    if (f.severity === "ok" || f.id === "daemon" || f.rootCause || !DAEMON_DEPENDENT.has(f.id)) return f;
    return { ...f, why: `likely cause: the daemon is not running (see 'daemon'). ${f.why ?? ""}`.trim() };
  });
}

/**
 * When a finding that stops the daemon is marked as the root cause — cni-config (flannel removed, its
 * config left), lease-own (the Node has no podCIDR: the daemon exits at start) — the daemon's own finding
 * and the not-ok findings a missing daemon would explain are its consequences: their why says so, naming
 * it (they are no fault of their own to repair).
 */
export function pointToRoot(findings: Finding[]): Finding[] {
  const root = findings.find((f) =>
    f.rootCause && f.severity !== "ok" && (f.id === "cni-config" || f.id === "lease-own")
  );
  if (!root) return findings;
  return findings.map((f) => {
    if (f === root || f.severity === "ok" || (f.id !== "daemon" && !DAEMON_DEPENDENT.has(f.id))) return f;
    const why = (f.why ?? "").replace(/^likely cause: the daemon is not running \(see 'daemon'\)\. /, "");
    return { ...f, why: `consequence of '${root.id}' (the root cause). ${why}`.trim() };
  });
}

/** The checks of this family. */
export const DAEMON_CHECKS: Check[] = [daemonCheck];
