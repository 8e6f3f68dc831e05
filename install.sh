#!/usr/bin/env bash
# install.sh — set up flanctl on a Debian 12 machine (idempotent, run as root).
#
#   ./install.sh         product: Deno (pinned), libnl, iproute2, iptables, nftables; flanctl on PATH;
#                        CNI symlinks in /opt/cni/bin.
#   ./install.sh --dev   also what tests and benchmarks need: etcd-server, etcd-client,
#                        containernetworking-plugins (reference Go CNI plugins), iperf3, ethtool, containerd,
#                        runc, mmdebstrap, umoci, skopeo, buildah, busybox-static, ipset, python3; the real peers
#                        built with `go` from the Go module proxy (tools/peers/build.sh: kube-apiserver,
#                        kube-controller-manager, kube-scheduler, kubelet, kubectl, kube-proxy, agnhost,
#                        e2e.test, CoreDNS, flanneld, crictl, kube-router, wireguard-go), cached in
#                        FLANCTL_DEV_CACHE (default /var/cache/flanctl-dev); FLANCTL_DEV_PEERS=0 skips them.
#   --systemd            also install deploy/flanctl.service as /etc/systemd/system/flanctl.service
#                        (not enabled: configure /etc/default/flanctl, then systemctl enable --now flanctl).
#   Environment: FLANCTL_PREFIX (default /usr/local), CNI_BIN_DIR (default /opt/cni/bin): a second install
#   beside the system one (benches of a checkout); FLANCTL_DENO_BIN: an already installed deno of the pinned
#   version to use instead of fetching one.
set -euo pipefail
START=$(date +%s)

DENO_VERSION=2.9.6
# How the launcher runs the daemon (`flanctl daemon`, `flanneld`): `deno run` flags, V8 flags and environment
# variables (space-separated NAME=value). bench/daemon_bench.ts reads these three lines to measure the daemon
# "as installed" (etcd store, vxlan, medians of 3 interleaved runs; RSS at 0 / 100 / 1,000 / 5,000 peers):
# - --max-semi-space-size=1: a 1 MiB young generation.
# - --no-code-cache: a run that writes V8's code cache for daemon.js (the first after install, and every
#   start of a fresh container) keeps more memory for its whole life; a warm cache saves nothing in RSS.
# - --jitless: no optimizing compilers: their code in the Deno binary is never paged in and no machine code is
#   made; full passes and programming stay within the daemon's goals.
# - --expose-gc: the daemon runs a full GC before giving free memory back (lib/daemon/memory.ts).
# What each one saves and costs, and the flags that gained nothing: docs/performance.md, "The daemon's
# launcher flags".
DAEMON_DENO_FLAGS="--no-code-cache"
DAEMON_V8_FLAGS="--max-semi-space-size=1,--jitless,--expose-gc"
DAEMON_ENV=""
PREFIX=${FLANCTL_PREFIX:-/usr/local}
LIBDIR=$PREFIX/lib/flanctl
BINDIR=$PREFIX/bin
CNI_BIN_DIR=${CNI_BIN_DIR:-/opt/cni/bin}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEV=0
SYSTEMD=0
for a in "$@"; do
  case "$a" in
    --dev) DEV=1 ;;
    --systemd) SYSTEMD=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option '$a' (use --dev, --systemd or --help)" >&2; exit 2 ;;
  esac
done

log() { printf 'install.sh: %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then echo "install.sh: run as root" >&2; exit 1; fi

# --- Debian packages -------------------------------------------------------------------------------
pkgs=(libnl-3-200 libnl-route-3-200 iproute2 iptables nftables libnftables1 kmod procps ca-certificates iputils-ping)
if [ "$DEV" = 1 ]; then
  pkgs+=(etcd-server etcd-client containernetworking-plugins iperf3 ethtool iputils-ping netcat-openbsd openssl conntrack)
  # Real peers: a container runtime (tests start their own containerd inside lab nodes), image tools (the
  # OCI image and local sandbox images, no registry), and what building the Go peers needs (cgo for
  # flanneld's udp backend; curl and unzip fetch a Go toolchain from the module proxy when there is none).
  pkgs+=(containerd runc mmdebstrap umoci skopeo buildah busybox-static gcc libc6-dev curl unzip)
  # kube-router's policy controller (the NetworkPolicy peer) programs iptables with ipset sets.
  pkgs+=(ipset)
  # Tests' helpers in pods and namespaces (servers, raw ICMP, the sd_notify receiver): python3 and its
  # standard library, named here rather than left to come with mmdebstrap's dependencies.
  pkgs+=(python3)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts etcd and containerd as services on install; flanctl's tests start their own inside
  # namespaces (etcd on loopback ports, one containerd per lab node with its own socket).
  if [ "$DEV" = 1 ] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now etcd >/dev/null 2>&1 || true
    systemctl disable --now containerd >/dev/null 2>&1 || true
  fi
else
  log "Debian packages present"
fi

# --- br_netfilter (--dev) ----------------------------------------------------------------------------------
# dev_br_netfilter SYSCTL: loads br_netfilter when SYSCTL (its bridge-nf-call-iptables) is missing. The root
# tests' daemons run in iptables mode, where flanneld and flanctl refuse to start without it
# (lib/daemon/preflight.ts); Debian builds it as a module that nothing loads. A kernel with it built in has
# the sysctl already; one without it (or without /lib/modules) gets a warning, and the root tests say so too.
dev_br_netfilter() {
  [ -e "$1" ] && return 0
  if modprobe br_netfilter 2>/dev/null; then
    log "loaded br_netfilter (until the next boot: 'echo br_netfilter >/etc/modules-load.d/flanctl.conf' keeps it)"
  else
    log "warning: br_netfilter is not loaded and 'modprobe br_netfilter' failed: the root tests' daemons will not start in iptables mode"
  fi
}
if [ "$DEV" = 1 ]; then dev_br_netfilter /proc/sys/net/bridge/bridge-nf-call-iptables; fi

# --- Deno, pinned, from the npm registry -------------------------------------------------------------
# The npm package's `bin` is a Node wrapper; we launch the platform binary directly (every CNI call
# pays process start-up).
DENO_HOME=$LIBDIR/deno
DENO_BIN=${FLANCTL_DENO_BIN:-$DENO_HOME/node_modules/@deno/linux-x64-glibc/deno}
mkdir -p "$BINDIR"
if [ ! -x "$DENO_BIN" ] || [ "$("$DENO_BIN" --version 2>/dev/null | head -1 | awk '{print $2}')" != "$DENO_VERSION" ]; then
  log "installing deno $DENO_VERSION from the npm registry"
  mkdir -p "$DENO_HOME"
  (cd "$DENO_HOME" && npm install --no-audit --no-fund --ignore-scripts --silent "deno@$DENO_VERSION" >/dev/null)
  if [ ! -x "$DENO_BIN" ]; then
    DENO_BIN=$(find "$DENO_HOME/node_modules/@deno" -maxdepth 2 -name deno -type f | head -1)
    chmod +x "$DENO_BIN"
  fi
fi
ln -sf "$DENO_BIN" "$BINDIR/deno"
log "deno: $("$DENO_BIN" --version | head -1)"

# --- npm dependencies (deno.lock pins them) ------------------------------------------------------------
export DENO_DIR=${DENO_DIR:-$LIBDIR/cache}
mkdir -p "$DENO_DIR"
(cd "$HERE" && "$DENO_BIN" install --frozen --quiet >/dev/null 2>&1 || "$DENO_BIN" cache --frozen main.ts)

# --- flanctl itself ------------------------------------------------------------------------------------
# Try `deno compile` (honouring DENORT_BIN); where its runtime cannot be downloaded, install a launcher
# that runs the same entry point with the pinned Deno. A compiled binary bakes one set of V8 flags for every
# verb (CNI calls too), so it gets only the 1 MiB young generation, not the daemon-only DAEMON_* settings.
mkdir -p "$LIBDIR"
how=""
if (cd "$HERE" && timeout 120 "$DENO_BIN" compile --quiet -A --no-check --frozen --v8-flags=--max-semi-space-size=1 --include lib/backend/udp/udp_worker.ts -o "$LIBDIR/flanctl.bin" main.ts) >/dev/null 2>"$LIBDIR/compile.log"; then
  install -m 0755 "$LIBDIR/flanctl.bin" "$BINDIR/flanctl"
  how="compiled binary (deno compile)"
else
  rm -f "$LIBDIR/flanctl.bin"
  # A copy of the sources, so the installed command does not depend on this checkout.
  rm -rf "$LIBDIR/src"; mkdir -p "$LIBDIR/src"
  cp -r "$HERE"/{main.ts,mod.ts,deno.json,deno.lock,cli,lib} "$LIBDIR/src/"
  # The CNI path (symlink names) runs one pre-bundled JavaScript file without deno.json or the lockfile:
  # no TypeScript, no module resolution (what it saves: docs/performance.md). Everything else runs main.ts.
  cni_js=""
  # The CNI calls' own DENO_DIR, holding only cni.js's code cache: commands run through main.ts (which
  # share $LIBDIR/cache) never grow the databases every plugin call opens (lib/install/code_cache.ts).
  CNI_DENO_DIR=$LIBDIR/cni-cache
  mkdir -p "$CNI_DENO_DIR"
  # The plugin names from the one list (lib/cni/names.ts), as a case pattern.
  cni_names=$("$DENO_BIN" eval --quiet --no-config \
    "import { CNI_PLUGIN_NAMES as n } from 'file://$LIBDIR/src/lib/cni/names.ts'; console.log(n.join('|'))")
  # Its `deno run` flags, from the one list (lib/cni/launch.ts: --no-lazy makes V8's code cache whole).
  cni_flags=$("$DENO_BIN" eval --quiet --no-config \
    "import { CNI_DENO_RUN_FLAGS as f } from 'file://$LIBDIR/src/lib/cni/launch.ts'; console.log(f.join(' '))")
  # The daemon bundle's, from the same module (the flags every bundle runs with).
  bundle_flags=$("$DENO_BIN" eval --quiet --no-config \
    "import { BUNDLE_DENO_RUN_FLAGS as f } from 'file://$LIBDIR/src/lib/cni/launch.ts'; console.log(f.join(' '))")
  # Minified: half the bytes for V8 to scan on every call (--keep-names keeps class names in errors).
  if "$DENO_BIN" bundle --quiet --platform deno --minify --keep-names -o "$LIBDIR/cni.js" \
    "$LIBDIR/src/cli/cni_main.ts" >/dev/null 2>&1; then
    cni_js="$LIBDIR/cni.js"
  fi
  # The CNI calls' deleted records (lib/cni/deleted.ts): a repeated DEL is answered by the launcher, without
  # starting Deno. Emptied before the launcher is rewritten: a record from before a downgrade to a version
  # that keeps none could name an attachment that version added since.
  CNI_DELETED_DIR=$LIBDIR/cni-deleted
  rm -rf "$CNI_DELETED_DIR"
  mkdir -p -m 0755 "$CNI_DELETED_DIR" # the launcher answers portmap's ADD only into an existing directory
  early_del=$(CNI_DELETED_DIR=$CNI_DELETED_DIR "$DENO_BIN" eval --quiet --no-config \
    "import { earlyDelSh as f } from 'file://$LIBDIR/src/lib/cni/launch.ts'; console.log(f(Deno.env.get('CNI_DELETED_DIR')))")
  # The daemon bundled the same way (cli/daemon_entry.ts): less RSS for its lifetime than main.ts's module
  # graph (bench/daemon_rss_bench.ts; docs/performance.md). Its udp worker still loads from $LIBDIR/src.
  daemon_js=""
  if "$DENO_BIN" bundle --quiet --platform deno --minify --keep-names --config "$LIBDIR/src/deno.json" -o "$LIBDIR/daemon.js" \
    "$LIBDIR/src/cli/daemon_entry.ts" >/dev/null 2>&1; then
    daemon_js="$LIBDIR/daemon.js"
  fi
  {
    echo '#!/bin/sh'
    echo '# flanctl launcher (deno compile could not fetch its runtime here): the pinned Deno runs the entry point.'
    echo "export DENO_DIR=\${DENO_DIR:-$DENO_DIR} DENO_NO_UPDATE_CHECK=1 FLANCTL_LIBDIR=$LIBDIR"
    if [ -n "$cni_js" ]; then
      echo 'case "${0##*/}" in'
      echo "  $cni_names)"
      printf '%s\n' "$early_del"
      # portmap's ADD without port mappings is answered here too (lib/cni/early_add.ts); it runs this same
      # command on the config's bytes when it does not answer.
      cni_exec="DENO_DIR=$CNI_DENO_DIR FLANCTL_CNI_DELETED_DIR=$CNI_DELETED_DIR FLANCTL_ARGV0=\"\$0\" exec \"$DENO_BIN\" run $cni_flags \"$cni_js\""
      CNI_DELETED_DIR=$CNI_DELETED_DIR CNI_EXEC=$cni_exec "$DENO_BIN" eval --quiet --no-config \
        "import { earlyAddSh as f } from 'file://$LIBDIR/src/lib/cni/early_add.ts'; console.log(f(Deno.env.get('CNI_DELETED_DIR'), Deno.env.get('CNI_EXEC')))"
      echo "    $cni_exec ;;"
      echo 'esac'
    fi
    # The daemon runs for months with thousands of peers: the DAEMON_* settings (top of this file);
    # FLANCTL_DAEMON_V8_FLAGS in the environment replaces DAEMON_V8_FLAGS and tells the daemon which flags
    # it runs with (a udp daemon re-runs itself without --jitless: its data path runs in JavaScript).
    setv8="FLANCTL_DAEMON_V8_FLAGS=\${FLANCTL_DAEMON_V8_FLAGS:-$DAEMON_V8_FLAGS}; export FLANCTL_DAEMON_V8_FLAGS; v8=\"$DAEMON_DENO_FLAGS --v8-flags=\$FLANCTL_DAEMON_V8_FLAGS\""
    echo "v8=\"\"; [ \"\${1:-}\" = daemon ] && { $setv8; }"
    if [ -n "$daemon_js" ]; then
      d="$DAEMON_ENV exec \"$DENO_BIN\" run $bundle_flags \$v8 \"$daemon_js\""
      echo "case \"\${0##*/}\" in flanneld) $setv8; $d \"\$@\" ;; esac"
      echo "[ \"\${1:-}\" = daemon ] && { shift; $d \"\$@\"; }"
    fi
    if [ -n "$DAEMON_ENV" ]; then echo "[ \"\${1:-}\" = daemon ] && export $DAEMON_ENV"; fi
    echo "FLANCTL_ARGV0=\"\$0\" exec \"$DENO_BIN\" run -A --no-check --no-prompt --cached-only --quiet \$v8 --config \"$LIBDIR/src/deno.json\" \"$LIBDIR/src/main.ts\" \"\$@\""
  } >"$BINDIR/flanctl"
  chmod 0755 "$BINDIR/flanctl"
  how="launcher running main.ts with deno $DENO_VERSION (deno compile failed: its runtime, denort, could not be fetched; point DENORT_BIN at a local denort to compile; see $LIBDIR/compile.log)"
fi
log "flanctl installed as $how"

# --- CNI symlinks -----------------------------------------------------------------------------------------
# The same code as the DaemonSet's init container (lib/install/cni.ts): every plugin name of
# lib/cni/names.ts, atomically, keeping a foreign plugin of the same name as <name>.flanctl-backup.
"$BINDIR/flanctl" install-cni --cni-bin-dir "$CNI_BIN_DIR" --link "$BINDIR/flanctl" | sed 's/^/install.sh: /'
log "CNI plugins linked in $CNI_BIN_DIR"
# A run of a new cni.js writes V8's code cache for it into its DENO_DIR (lib/cni/launch.ts): make that run
# here, again until the cache is there (the runtime writes it from a background thread that a quick exit
# can cut short), then checkpoint it out of SQLite's write-ahead log (lib/install/code_cache.ts): no pod's
# ADD pays for compiling the bundle, and no call reads the log.
if [ -n "${cni_js:-}" ]; then
  if out=$(CNI_COMMAND=VERSION "$CNI_BIN_DIR/loopback" </dev/null 2>&1) && [ "${out#*supportedVersions}" != "$out" ]; then
    if "$DENO_BIN" eval --quiet --no-config "
      import { warmCodeCache } from 'file://$LIBDIR/src/lib/install/code_cache.ts';
      const run = () => new Deno.Command('$CNI_BIN_DIR/loopback', {
        env: { CNI_COMMAND: 'VERSION', FLANCTL_CNI_WARM: '1' }, stdin: 'null', stdout: 'null', stderr: 'null' }).output();
      Deno.exit(await warmCodeCache('$CNI_DENO_DIR', new URL('file://$cni_js').href, run) ? 0 : 1);"; then
      log "CNI bundle run (V8 code cache written and checkpointed in $CNI_DENO_DIR)"
    else
      log "warning: the CNI bundle ran but left no V8 code cache in $CNI_DENO_DIR"
    fi
  else
    log "warning: the CNI bundle did not run: $out"
  fi
fi

# --- systemd unit (opt-in) ----------------------------------------------------------------------------------
if [ "$SYSTEMD" = 1 ]; then
  sed "s|/usr/local/|$PREFIX/|g" "$HERE/deploy/flanctl.service" >/etc/systemd/system/flanctl.service.tmp
  chmod 0644 /etc/systemd/system/flanctl.service.tmp
  mv -f /etc/systemd/system/flanctl.service.tmp /etc/systemd/system/flanctl.service
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
  log "installed /etc/systemd/system/flanctl.service (configure /etc/default/flanctl, then: systemctl enable --now flanctl)"
fi
# --- real peers (--dev) -------------------------------------------------------------------------------------
# Built with the ordinary `go` client through the Go module proxy, cached by version outside the checkout
# (a cached version is not rebuilt); a Go toolchain is fetched when the machine has none or an old one.
if [ "$DEV" = 1 ] && [ "${FLANCTL_DEV_PEERS:-1}" != 0 ]; then
  peers_start=$(date +%s)
  "$HERE/tools/peers/build.sh" 2>&1 | sed 's/^/install.sh: /'
  log "real peers ready in $(($(date +%s) - peers_start)) s (${FLANCTL_DEV_CACHE:-/var/cache/flanctl-dev})"
fi
log "done in $(($(date +%s) - START)) s"
