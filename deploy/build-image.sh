#!/usr/bin/env bash
# deploy/build-image.sh — flanctl's container image, built without a registry or a container engine:
#
#   deploy/build-image.sh [OUT]        (root; default OUT: dist/flanctl-image.tar)
#   deploy/build-image.sh --peer kube-proxy|coredns|agnhost|glibc-dns-testing [OUT]   (the --kube lab's peer images, from the
#                                      programs tools/peers/build.sh built; deploy/image-lib.sh, image_peer)
#
# 1. A Debian root filesystem (mmdebstrap, --variant=essential) with only what the daemon and install-cni
#    need: libnl, libnftables, nftables, iptables, iproute2, conntrack, CA certificates (install.sh's list).
#    It is cached outside the checkout ($FLANCTL_IMAGE_CACHE, default /var/cache/flanctl-dev/image) under
#    the sha256 of its tarball, found through the hash of its inputs (suite, mirrors, packages, options):
#    later builds skip mmdebstrap (~1 min) and reuse the same packages, so they give the same digest.
#    FLANCTL_IMAGE_REFRESH=1 builds the base again from the mirror of today. The mirrors are this machine's
#    apt sources for the suite and its -updates and -security (tools/mirrors.sh: sources.list, *.list and
#    deb822 *.sources files); the build stops, naming what to add, when they have no source for the suite.
# 2. install.sh run inside that root filesystem (chroot): the pinned Deno (this machine's, the version
#    install.sh pins), the sources, the bundles (cni.js, daemon.js) and the launcher, laid out exactly as on
#    a host; `deno compile` where it can fetch its runtime, else the launcher. npm packages come from this
#    machine's npm registry (NPM_CONFIG_REGISTRY, else `npm config get registry`).
# 3. Caches and logs stripped (apt, /var/log, ldconfig's aux-cache, Deno's SQLite caches, V8 code caches),
#    then one layer tar: names sorted, every mtime = SOURCE_DATE_EPOCH (default: the last commit's time),
#    numeric owners, no atime/ctime; tools/oci_layout.ts writes the config (labelled with deno.json's version),
#    the manifest and the index (tagged as deploy/kube-flanctl.yml's image line) and Docker's manifest.json.
#
# Output: an OCI archive that `ctr images import`, `podman load` and `docker load` accept. Two builds of the
# same tree (with the cached base) give byte-identical archives. Prints the image digest, its sizes and what
# takes the space. Needs: mmdebstrap, GNU tar, unshare (util-linux), the pinned deno (install.sh installs
# both; `./install.sh --dev` installs mmdebstrap and skopeo).
#   Environment: SOURCE_DATE_EPOCH, FLANCTL_IMAGE_CACHE, FLANCTL_IMAGE_REFRESH=1, FLANCTL_DENO_BIN.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$HERE/dist/flanctl-image.tar}
CACHE=${FLANCTL_IMAGE_CACHE:-/var/cache/flanctl-dev/image}
SUITE=bookworm
# install.sh's product list (it checks them with dpkg-query inside the image) and conntrack (portmap's
# fallback for clearing UDP entries).
PACKAGES=libnl-3-200,libnl-route-3-200,iproute2,iptables,nftables,libnftables1,kmod,procps,ca-certificates,iputils-ping,conntrack
# The base's own timestamp (files' mtimes are clamped again in step 3; fixed, so the base survives commits).
BASE_EPOCH=1700000000
MMDEBSTRAP_OPTS=(
  --variant=essential
  # merged /usr without the usrmerge package (which would pull in perl: ~25 MB)
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
)

log() { printf 'build-image: %s\n' "$*" >&2; }
die() { printf 'build-image: %s\n' "$*" >&2; exit 1; }
# shellcheck source=deploy/image-lib.sh
. "$HERE/deploy/image-lib.sh"

[ "$(id -u)" = 0 ] || die "run as root (mmdebstrap and chroot need it)"
command -v mmdebstrap >/dev/null || die "mmdebstrap not found: apt-get install mmdebstrap (./install.sh --dev does)"
command -v unshare >/dev/null || die "unshare not found: apt-get install util-linux"

# Where packages come from: this machine's configuration, never a host written here (tools/mirrors.sh).
# shellcheck source=../tools/mirrors.sh
source "$HERE/tools/mirrors.sh"
mirrors=$(apt_sources "$SUITE" 2>&1) || die "$mirrors"
mapfile -t MIRRORS <<<"$mirrors"
NPM_REGISTRY=$(npm_registry 2>&1) || die "$NPM_REGISTRY"

DENO_VERSION=$(sed -n 's/^DENO_VERSION=//p' "$HERE/install.sh")
DENO=${FLANCTL_DENO_BIN:-$(command -v deno || true)}
[ -n "$DENO" ] || die "deno not found: run ./install.sh (it installs Deno $DENO_VERSION)"
DENO=$(readlink -f "$DENO")
have=$("$DENO" --version | head -1 | awk '{print $2}')
[ "$have" = "$DENO_VERSION" ] || die "$DENO is deno $have; the image needs install.sh's pinned $DENO_VERSION (set FLANCTL_DENO_BIN)"

case "$(uname -m)" in
  x86_64) ARCH=amd64 NPM_ARCH=x64 ;;
  aarch64) ARCH=arm64 NPM_ARCH=arm64 ;;
  *) die "unsupported machine $(uname -m) (amd64 and arm64 are)" ;;
esac
# The lab's peer images (kube-proxy, CoreDNS, agnhost): the same base and packing (deploy/image-lib.sh).
if [ "${1:-}" = --peer ]; then
  image_peer "${2:-}" "${3:-}"
  exit 0
fi
VERSION=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$HERE/deno.json" | head -1)
[ -n "$VERSION" ] || die "deno.json: no version"
mapfile -t refs < <(sed -n 's/^ *image: *//p' "$HERE/deploy/kube-flanctl.yml" | sort -u)
[ "${#refs[@]}" = 1 ] || die "deploy/kube-flanctl.yml: expected one image name on its image lines, found ${#refs[@]}"
REF=${refs[0]}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$HERE" log -1 --format=%ct 2>/dev/null || echo "$BASE_EPOCH")
fi
REVISION=$(git -C "$HERE" rev-parse HEAD 2>/dev/null || true)
if [ -n "$REVISION" ] && [ -n "$(git -C "$HERE" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  REVISION="$REVISION-dirty"
fi

# --- 1. the Debian base, cached by content -------------------------------------------------------------
image_base "$PACKAGES"

# --- 2. flanctl inside it, by install.sh -----------------------------------------------------------------
WORK=$(mktemp -d /var/tmp/flanctl-image.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
R=$WORK/rootfs
mkdir -p "$R"
tar -xpf "$base" --numeric-owner -C "$R"
rm -rf "${R:?}"/dev/* # the runtime provides /dev; device nodes in a layer are refused by rootless loaders
SRC=usr/src/flanctl-build
mkdir -p "$R/$SRC"
(cd "$HERE" && cp -r install.sh main.ts mod.ts deno.json deno.lock cli lib "$R/$SRC/")
# The pinned Deno where install.sh keeps it (it then skips fetching one).
DENO_DEST=usr/local/lib/flanctl/deno/node_modules/@deno/linux-$NPM_ARCH-glibc/deno
install -D -m 0755 "$DENO" "$R/$DENO_DEST"
had_resolv=0
[ -e "$R/etc/resolv.conf" ] && had_resolv=1 && cp -a "$R/etc/resolv.conf" "$WORK/resolv.conf.base"
log "install.sh inside the image's root filesystem"
unshare --mount --propagation private -- bash -euc '
  R=$1 SRC=$2
  mount -t proc proc "$R/proc"
  mount --bind /dev "$R/dev"
  mount -t tmpfs tmpfs "$R/tmp"
  rm -f "$R/etc/resolv.conf"; cp -L /etc/resolv.conf "$R/etc/resolv.conf"
  # The npm registry is reached as this host reaches it: its registry, its CA bundle (a TLS-inspecting
  # proxy'"'"'s CA included) and proxy settings, for the build only (in the tmpfs, not in the image).
  cp -L "$4" "$R/tmp/host-ca.crt"
  proxies=(); for v in HTTPS_PROXY HTTP_PROXY NO_PROXY https_proxy http_proxy no_proxy; do
    [ -n "${!v:-}" ] && proxies+=("$v=${!v}"); done
  chroot "$R" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    SOURCE_DATE_EPOCH="$3" CNI_BIN_DIR=/tmp/cni-bin DENO_CERT=/tmp/host-ca.crt NPM_CONFIG_REGISTRY="$5" \
    "${proxies[@]}" bash "/$SRC/install.sh"
' _ "$R" "$SRC" "$SOURCE_DATE_EPOCH" "${DENO_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}" "$NPM_REGISTRY" \
  >"$WORK/install.log" 2>&1 || {
  cat "$WORK/install.log" >&2
  die "install.sh failed inside the image (log above)"
}
sed 's/^/  /' "$WORK/install.log" >&2
rm -f "$R/etc/resolv.conf"
[ "$had_resolv" = 1 ] && cp -a "$WORK/resolv.conf.base" "$R/etc/resolv.conf"

# --- 3. strip, normalise, pack ----------------------------------------------------------------------------
L=$R/usr/local/lib/flanctl
rm -rf "${R:?}/$SRC" "$R"/tmp/* "$R"/var/tmp/* "$R"/root/.cache "$R"/root/.npm "$R"/root/.deno \
  "$R"/var/cache/apt/* "$R"/var/lib/apt/lists/* "$R"/var/cache/ldconfig/aux-cache \
  "$R"/var/cache/debconf/*-old "$R"/var/lib/dpkg/*-old \
  "$L/compile.log" "$L/cni-cache" "$L"/cache/*_cache_v2* "$L/cache/gen"
find "$R/var/log" -type f -delete
# Not used at run time: the bundler's esbuild (install.sh's bundles are made), the TypeScript compiler (the
# gate's tools/ import it) and fast-check (the property tests' generators; the boundary gate keeps it out of
# product code): dropped from the installed copy's deno.json and deno.lock too, as Deno caches every npm
# package of the lock before running main.ts.
rm -rf "$L/cache/dl" "$L"/cache/npm/*/@esbuild "$L"/cache/npm/*/typescript \
  "$L"/cache/npm/*/fast-check "$L"/cache/npm/*/pure-rand # npm/<registry host>/
"$DENO" eval --quiet --no-config "
  const devs = ['typescript', 'fast-check', 'pure-rand'];
  const cfgPath = '$L/src/deno.json', lockPath = '$L/src/deno.lock';
  const cfg = JSON.parse(Deno.readTextFileSync(cfgPath));
  for (const dev of devs) delete cfg.imports[dev];
  Deno.writeTextFileSync(cfgPath, JSON.stringify(cfg, null, 2) + '\\n');
  const lock = JSON.parse(Deno.readTextFileSync(lockPath));
  const drop = (k) => devs.some((dev) => k === 'npm:' + dev || k.startsWith('npm:' + dev + '@') || k.startsWith(dev + '@'));
  for (const sec of ['specifiers', 'npm']) for (const k of Object.keys(lock[sec] ?? {})) if (drop(k)) delete lock[sec][k];
  lock.workspace.dependencies = lock.workspace.dependencies.filter((d) => !drop(d));
  Deno.writeTextFileSync(lockPath, JSON.stringify(lock, null, 2) + '\\n');
"
# The CNI bundle's and main.ts's code caches are made on the host by install-cni / at first run.
image_layer "$R" "$WORK/layer.tar" "$SOURCE_DATE_EPOCH"

# What takes the space (before the rootfs goes).
mb() { awk -v n="$1" -v b="$2" 'BEGIN { printf "  %-58s %7.1f MB\n", n, b / 1048576 }'; }
space() {
  local total
  total=$(du -sb "$R" | cut -f1)
  mb "root filesystem (uncompressed)" "$total"
  for p in "$DENO_DEST" usr/local/lib/flanctl/cache usr/local/lib/flanctl/src usr/local/lib/flanctl/cni.js \
    usr/local/lib/flanctl/daemon.js usr/lib/x86_64-linux-gnu usr/lib/aarch64-linux-gnu usr/bin usr/sbin \
    usr/share var/lib/dpkg etc; do
    [ -e "$R/$p" ] || continue
    mb "/$p" "$(du -sb "$R/$p" | cut -f1)"
  done
}
SPACE=$(space)

image_archive "$WORK/layer.tar" "$WORK/oci" "$OUT" "$SOURCE_DATE_EPOCH" --ref "$REF" --version "$VERSION" \
  --revision "$REVISION"
gz=$(gzip -n -6 <"$OUT" | wc -c)
log "built $OUT"
printf 'image     %s\n' "$REF"
printf 'digest    %s\n' "$digest"
printf 'archive   %s (%s bytes, sha256 %s)\n' "$OUT" "$(stat -c %s "$OUT")" "$(sha256sum <"$OUT" | cut -d' ' -f1)"
printf 'gzipped   %s bytes (what a registry would store)\n' "$gz"
printf 'version   %s, revision %s, SOURCE_DATE_EPOCH %s\n' "$VERSION" "${REVISION:-none}" "$SOURCE_DATE_EPOCH"
printf 'space:\n%s\n' "$SPACE"
