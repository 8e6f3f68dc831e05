#!/usr/bin/env bash
# tools/peers/build.sh — build the real peers the tests run beside flanctl, with the ordinary `go` client
# through the Go module proxy, cached by version OUTSIDE the checkout (install.sh --dev calls this).
#
#   kubernetes  kube-apiserver, kube-controller-manager, kubelet, kubectl from the module k8s.io/kubernetes
#               through a generated wrapper module (one `replace` per staging module: k8s.io/kubernetes's own
#               go.mod replaces them with ./staging/..., which `go install mod@version` refuses)
#   flanneld    from the module github.com/flannel-io/flannel, without the tencentcloud VPC backend (the proxy
#               refuses its SDK: the blank import of pkg/backend/tencentvpc is removed from a copy of main.go)
#   crictl      from the module sigs.k8s.io/cri-tools/cmd/crictl
#   kube-scheduler, kube-proxy, agnhost, e2e (e2e.test)  from the same wrapper module as kubernetes, each in a
#               cache directory of its own
#   coredns     the lab's cluster DNS, from the module github.com/coredns/coredns (no replace: `go install`)
#   cni-plugins the reference CNI plugins the CNI tests and benches compare against, from the module
#               github.com/containernetworking/plugins (its go.mod has no replace: `go install pkg@version`)
#   cnitool     libcni's command-line runtime, from the module github.com/containernetworking/cni (the
#               libcni release containerd 2.x vendors; the conflist benches drive the chain with it)
#   wireguard-go  the userspace WireGuard the wireguard backend drives over its UAPI socket where the kernel
#               has no wireguard module, from the module golang.zx2c4.com/wireguard (`go install`)
#   kube-router the NetworkPolicy peer (its policy controller, run firewall-only as k3s embeds it), from the
#               module github.com/cloudnativelabs/kube-router/v2 (no replace: `go install pkg@version`)
#
# Layout: $FLANCTL_DEV_CACHE (default /var/cache/flanctl-dev)/<name>-<version>/bin/<binary>, a `stamp` file
# written last (a build cut short is redone), the generated wrapper module in <name>-<version>/src. Go's own
# module and build caches live in $FLANCTL_DEV_CACHE/go{mod,cache}, so a fresh clone on this machine reuses
# everything. Nothing of the peers' code is ever written into the checkout.
#
# Usage: tools/peers/build.sh [kubernetes|kube-scheduler|kube-proxy|agnhost|e2e|coredns|flanneld|crictl|cni-plugins|
#   cnitool|wireguard-go|kube-router|go]...   (no argument: all of them)
# Environment: FLANCTL_DEV_CACHE, FLANCTL_BUILD_JOBS (go build -p, default 2), FLANCTL_GO (the go binary to
# use; one that does not exist makes the script fetch the toolchain). The module proxy is this machine's:
# GOPROXY, else `go env GOPROXY` of the go found (tools/mirrors.sh's go_proxies keeps its proxy URLs, without
# `direct`); the script stops with one line naming what to configure when there is none.
set -euo pipefail

K8S_VERSION=v1.37.2
FLANNEL_VERSION=v0.28.10
CRICTL_VERSION=v1.37.0
CNI_PLUGINS_VERSION=v1.10.0
CNITOOL_VERSION=v1.3.0
COREDNS_VERSION=v1.15.0
# wireguard-go publishes no tags on the module proxy: a pseudo-version (the newest when this was pinned).
WIREGUARD_GO_VERSION=v0.0.0-20260522210424-ecfc5a8d5446
# The newest kube-router/v2 the module proxy serves (later tags are refused with 403).
KUBE_ROUTER_VERSION=v2.1.0
# The reference plugins built (tests/cni_helpers.ts names these): the module's package of each.
CNI_PLUGINS="main/bridge main/loopback main/ptp ipam/host-local meta/portmap"
# The toolchain installed when the machine has no go, or one older than a module needs (golang.org/toolchain
# on the module proxy: the same zip `GOTOOLCHAIN=goX.Y.Z` makes a go >= 1.21 fetch).
GO_TOOLCHAIN_VERSION=1.26.8
# Bumped when a recipe below changes, so that a cached build made by an older recipe is redone.
RECIPE=1

CACHE=${FLANCTL_DEV_CACHE:-/var/cache/flanctl-dev}
JOBS=${FLANCTL_BUILD_JOBS:-2}
export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache GOFLAGS=-buildvcs=false GOTELEMETRY=off
export GOTOOLCHAIN=local
mkdir -p "$CACHE"

log() { printf 'peers: %s\n' "$*" >&2; }
die() { printf 'peers: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=../mirrors.sh
source "$(dirname "${BASH_SOURCE[0]}")/../mirrors.sh"
# The module proxies: GOPROXY, else what the machine's go is configured with (`go env GOPROXY` reads
# `go env -w` settings and knows go's own default), set once for every go command below.
use_goproxy() {
  local v=${GOPROXY:-} g
  if [ -z "$v" ]; then
    for g in "${FLANCTL_GO:-}" "$(command -v go || true)" /usr/local/go/bin/go; do
      [ -n "$g" ] && [ -x "$g" ] && v=$("$g" env GOPROXY 2>/dev/null) && [ -n "$v" ] && break
    done
  fi
  GOPROXY=$(go_proxies "$v" 2>&1) || die "$GOPROXY"
  export GOPROXY
}
now() { date +%s; }

# ver_ge A B: is Go version A >= B (1.26.8, 1.25, 1.25.0 ...)
ver_ge() {
  local IFS=.
  # shellcheck disable=SC2206
  local a=($1) b=($2) i
  for i in 0 1 2; do
    local x=${a[i]:-0} y=${b[i]:-0}
    ((10#$x > 10#$y)) && return 0
    ((10#$x < 10#$y)) && return 1
  done
  return 0
}

# --- Go ------------------------------------------------------------------------------------------------
GO=""
go_version() { "$1" env GOVERSION 2>/dev/null | sed -n 's/^go\([0-9][0-9.]*\).*/\1/p'; }

# The toolchain module's zip from the proxy, unpacked in the cache (used when no go >= 1.21 is at hand).
fetch_toolchain() {
  local v=$1 dir=$CACHE/go-$1
  if [ -x "$dir/bin/go" ]; then echo "$dir/bin/go"; return; fi
  local arch
  case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) die "no Go toolchain for $(uname -m)" ;; esac
  local mod="v0.0.1-go$v.linux-$arch" tmp
  tmp=$(mktemp -d "$CACHE/.go-XXXXXX")
  log "fetching the Go toolchain go$v (golang.org/toolchain@$mod) from $GOPROXY"
  curl -fsSL --retry 3 -o "$tmp/t.zip" "${GOPROXY%%,*}/golang.org/toolchain/@v/$mod.zip" ||
    die "could not fetch golang.org/toolchain@$mod from ${GOPROXY%%,*}"
  (cd "$tmp" && unzip -q t.zip)
  local root="$tmp/golang.org/toolchain@$mod"
  [ -x "$root/bin/go" ] || die "golang.org/toolchain@$mod has no bin/go"
  rm -rf "$dir"
  mv "$root" "$dir"
  rm -rf "$tmp"
  echo "$dir/bin/go"
}

# need_go MIN: set GO to a go >= MIN (the machine's if it is new enough, else a toolchain from the proxy).
need_go() {
  local min=$1 cand v
  if [ -z "$GO" ]; then
    local cands=("$(command -v go || true)" /usr/local/go/bin/go)
    # FLANCTL_GO names the go to use (only it: a path that is not a go means "none here").
    [ -n "${FLANCTL_GO:-}" ] && cands=("$FLANCTL_GO")
    for cand in "${cands[@]}"; do
      [ -n "$cand" ] && [ -x "$cand" ] && { GO=$cand; break; }
    done
  fi
  if [ -n "$GO" ] && v=$(go_version "$GO") && [ -n "$v" ] && ver_ge "$v" "$min"; then return; fi
  local want=$GO_TOOLCHAIN_VERSION
  ver_ge "$want" "$min" || want=$min
  log "go ${v:-absent} is older than $min: installing go$want"
  GO=$(fetch_toolchain "$want")
  v=$(go_version "$GO")
  ver_ge "$v" "$min" || die "the toolchain go$v is older than $min"
}

# The `go` line of a go.mod file.
gomod_go() { sed -n 's/^go \([0-9.]*\).*/\1/p' "$1" | head -1; }

stamp_ok() { [ -f "$1/stamp" ] && [ "$(cat "$1/stamp")" = "$2" ]; }

# with_lock DIR CMD...: one build of a directory at a time (CI and a developer on the same machine).
with_lock() {
  local d=$1; shift
  mkdir -p "$d"
  exec {lockfd}>"$d.lock"
  flock "$lockfd"
  "$@"
  local rc=$?
  exec {lockfd}>&-
  return $rc
}

# --- Kubernetes ----------------------------------------------------------------------------------------
# kube_ldflags: the -ldflags of every program built from the kubernetes wrapper module (stripped, with
# $K8S_VERSION in component-base's and client-go's version variables, as upstream's release sets them).
kube_ldflags() {
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  printf '%s\n' "$ld"
}

build_kubernetes() {
  local dir=$CACHE/kubernetes-$K8S_VERSION want="kubernetes $K8S_VERSION recipe $RECIPE"
  if stamp_ok "$dir" "$want"; then log "kubernetes $K8S_VERSION: cached in $dir/bin"; return; fi
  local t0; t0=$(now)
  need_go 1.21
  local info gomod
  info=$("$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION") || die "go mod download k8s.io/kubernetes@$K8S_VERSION failed"
  gomod=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [ -f "$gomod" ] || die "no go.mod for k8s.io/kubernetes@$K8S_VERSION"
  local gov; gov=$(gomod_go "$gomod")
  need_go "$gov"
  log "kubernetes $K8S_VERSION: go $gov wanted, using $("$GO" env GOVERSION)"
  # The staging modules k8s.io/kubernetes replaces with ./staging/src/k8s.io/<m>: each becomes <m> v0.Y.Z.
  local staging="v0.${K8S_VERSION#v1.}"
  local src=$dir/src
  rm -rf "$src" "$dir/bin" "$dir/stamp"
  mkdir -p "$src"
  {
    echo "// Generated by flanctl's tools/peers/build.sh: a wrapper that builds k8s.io/kubernetes $K8S_VERSION"
    echo "// through the module proxy (its staging modules replaced by their published $staging)."
    echo "module kbwrap"
    echo
    echo "go $gov"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    sed -n 's|^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/src/k8s.io/.*$|replace \1 => \1 '"$staging"'|p' "$gomod"
  } >"$src/go.mod"
  local n; n=$(grep -c '^replace ' "$src/go.mod" || true)
  [ "$n" -gt 0 ] || die "found no staging replaces in k8s.io/kubernetes@$K8S_VERSION's go.mod"
  log "kubernetes $K8S_VERSION: wrapper module with $n staging replaces ($src/go.mod)"
  cat >"$src/tools.go" <<'EOF'
//go:build tools

// Generated by flanctl's tools/peers/build.sh: pins the commands built from k8s.io/kubernetes.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
  (cd "$src" && "$GO" mod tidy) || die "go mod tidy of the kubernetes wrapper failed"
  local ld; ld=$(kube_ldflags)
  mkdir -p "$dir/bin.tmp"
  log "kubernetes $K8S_VERSION: building kube-apiserver kube-controller-manager kubelet kubectl (go build -p $JOBS)"
  (cd "$src" && CGO_ENABLED=0 "$GO" build -p "$JOBS" -trimpath -ldflags "$ld" -o "$dir/bin.tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl) || die "building kubernetes $K8S_VERSION failed"
  rm -rf "$dir/bin"; mv "$dir/bin.tmp" "$dir/bin"
  echo "$want" >"$dir/stamp"
  log "kubernetes $K8S_VERSION: built in $(($(now) - t0)) s: $("$dir/bin/kube-apiserver" --version)"
}

# --- more programs from the kubernetes wrapper module -----------------------------------------------------
# build_kube_cmds NAME PKG...: each in a cache directory of its own (NAME-<version>), built from a copy of the
# kubernetes wrapper module (so a cached kubernetes build stays valid): the same versions, the same ldflags.
# A package ending in /test/e2e is a test binary (`go test -c`, as upstream makes e2e.test).
#   kube-scheduler  lab up --kube binds pods with it
#   kube-proxy      Services in lab up --kube (its image: deploy/build-image.sh --peer kube-proxy)
#   agnhost         the e2e suite's test image binary (static: CGO_ENABLED=0)
#   e2e             e2e.test, Kubernetes' own conformance suite (deno task e2e)
build_kube_cmds() {
  local name=$1; shift
  local dir=$CACHE/$name-$K8S_VERSION want="$name $K8S_VERSION recipe $RECIPE"
  if stamp_ok "$dir" "$want"; then log "$name $K8S_VERSION: cached in $dir/bin"; return; fi
  with_lock "$CACHE/kubernetes-$K8S_VERSION" build_kubernetes
  local t0; t0=$(now)
  local kdir=$CACHE/kubernetes-$K8S_VERSION
  need_go "$(gomod_go "$kdir/src/go.mod")"
  local src=$dir/src pkg
  rm -rf "$src" "$dir/bin" "$dir/stamp"
  mkdir -p "$src"
  cp "$kdir/src/go.mod" "$kdir/src/go.sum" "$src/"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for pkg in "$@"; do printf '\t_ "%s"\n' "$pkg"; done
    printf ')\n'
  } >"$src/tools.go"
  (cd "$src" && "$GO" mod tidy) || die "go mod tidy of the $name wrapper failed"
  local ld; ld=$(kube_ldflags)
  mkdir -p "$dir/bin.tmp"
  log "$name $K8S_VERSION: building $* (go -p $JOBS)"
  for pkg in "$@"; do
    if [ "${pkg%/test/e2e}" != "$pkg" ]; then
      (cd "$src" && CGO_ENABLED=0 "$GO" test -c -p "$JOBS" -trimpath -ldflags "$ld" \
        -o "$dir/bin.tmp/e2e.test" "$pkg") || die "building $pkg $K8S_VERSION failed"
    else
      (cd "$src" && CGO_ENABLED=0 "$GO" build -p "$JOBS" -trimpath -ldflags "$ld" -o "$dir/bin.tmp/" \
        "$pkg") || die "building $pkg $K8S_VERSION failed"
    fi
  done
  rm -rf "$dir/bin"; mv "$dir/bin.tmp" "$dir/bin"
  echo "$want" >"$dir/stamp"
  log "$name $K8S_VERSION: built in $(($(now) - t0)) s ($(cd "$dir/bin" && du -sh -- * | tr '\t\n' ' '))"
}

# --- peers built straight from their module: `go install pkg@version` ------------------------------------
# go_install_peer NAME VERSION MOD LDFLAGS ABOUT PKG...: builds $CACHE/NAME-VERSION/bin with
# `go install -trimpath -ldflags LDFLAGS PKG...` (static; each PKG names its @VERSION) from module MOD at
# VERSION, unless its stamp says it is built by this recipe ("cached"). MOD's go.mod must have no replace
# directives (`go install pkg@version` refuses them) and names the go it needs. ABOUT, run in bin/ (empty:
# none), says what was built in the log line. Optional, as variables set for the call: PEER_NOTE (appended
# to the stamp, so that changing it rebuilds) and PEER_RENAME ("from:to", a binary renamed after install).
go_install_peer() {
  local name=$1 version=$2 mod=$3 ldflags=$4 about=$5; shift 5
  local dir=$CACHE/$name-$version want="$name $version recipe $RECIPE${PEER_NOTE:-}"
  if stamp_ok "$dir" "$want"; then log "$name $version: cached in $dir/bin"; return; fi
  local t0; t0=$(now)
  need_go 1.21
  local info gomod
  info=$("$GO" mod download -json "$mod@$version") || die "go mod download $mod@$version failed"
  gomod=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [ -f "$gomod" ] || die "no go.mod for $mod@$version"
  ! grep -q '^[[:space:]]*replace\b' "$gomod" || die "$mod@$version's go.mod has replace directives: review this recipe"
  need_go "$(gomod_go "$gomod")"
  rm -rf "$dir/bin" "$dir/stamp"
  mkdir -p "$dir/bin.tmp"
  GOBIN=$dir/bin.tmp CGO_ENABLED=0 "$GO" install -p "$JOBS" -trimpath -ldflags "$ldflags" "$@" ||
    die "go install $name $version failed"
  if [ -n "${PEER_RENAME:-}" ]; then mv "$dir/bin.tmp/${PEER_RENAME%%:*}" "$dir/bin.tmp/${PEER_RENAME#*:}"; fi
  rm -rf "$dir/bin"; mv "$dir/bin.tmp" "$dir/bin"
  echo "$want" >"$dir/stamp"
  local said=""
  [ -z "$about" ] || said=": $(cd "$dir/bin" && eval "$about" 2>&1 | head -1 | head -c 200)"
  log "$name $version: built in $(($(now) - t0)) s$said"
}

# --- CoreDNS (the lab's cluster DNS; its image: deploy/build-image.sh --peer coredns) ------------------------
build_coredns() {
  local mod=github.com/coredns/coredns
  # As upstream's release build: static, the version is the module's own (coremain.CoreVersion).
  go_install_peer coredns "$COREDNS_VERSION" "$mod" "-s -w -X $mod/coremain.GitCommit=$COREDNS_VERSION" \
    "./coredns -version" "$mod@$COREDNS_VERSION"
}

# --- flanneld -----------------------------------------------------------------------------------------
build_flanneld() {
  local dir=$CACHE/flanneld-$FLANNEL_VERSION want="flanneld $FLANNEL_VERSION recipe $RECIPE"
  if stamp_ok "$dir" "$want"; then log "flanneld $FLANNEL_VERSION: cached in $dir/bin"; return; fi
  local t0; t0=$(now)
  need_go 1.21
  local info mdir
  # Only the module's own zip: its dependency tencentcloud-sdk-go/tencentcloud/vpc is refused by the proxy.
  info=$("$GO" mod download -json "github.com/flannel-io/flannel@$FLANNEL_VERSION") ||
    die "go mod download github.com/flannel-io/flannel@$FLANNEL_VERSION failed"
  mdir=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -f "$mdir/main.go" ] || die "no main.go in github.com/flannel-io/flannel@$FLANNEL_VERSION"
  need_go "$(gomod_go "$mdir/go.mod")"
  local src=$dir/src
  rm -rf "$src" "$dir/bin" "$dir/stamp"
  mkdir -p "$dir"
  cp -r "$mdir" "$src"
  chmod -R u+w "$src"
  grep -q '"github.com/flannel-io/flannel/pkg/backend/tencentvpc"' "$src/main.go" ||
    die "flanneld $FLANNEL_VERSION: main.go no longer imports pkg/backend/tencentvpc: review this recipe"
  sed -i '\|_ "github.com/flannel-io/flannel/pkg/backend/tencentvpc"|d' "$src/main.go"
  rm -rf "$src/pkg/backend/tencentvpc"
  log "flanneld $FLANNEL_VERSION: building without the tencentvpc backend (its SDK is refused by the module proxy)"
  (cd "$src" && "$GO" mod tidy) || die "go mod tidy of flannel $FLANNEL_VERSION (without tencentvpc) failed"
  mkdir -p "$dir/bin.tmp"
  (cd "$src" && CGO_ENABLED=1 "$GO" build -p "$JOBS" -trimpath \
    -ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL_VERSION" \
    -o "$dir/bin.tmp/flanneld" .) || die "building flanneld $FLANNEL_VERSION failed"
  rm -rf "$dir/bin"; mv "$dir/bin.tmp" "$dir/bin"
  echo "$want" >"$dir/stamp"
  log "flanneld $FLANNEL_VERSION: built in $(($(now) - t0)) s: $("$dir/bin/flanneld" --version 2>&1 | head -1)"
}

# --- crictl -------------------------------------------------------------------------------------------
build_crictl() {
  go_install_peer crictl "$CRICTL_VERSION" sigs.k8s.io/cri-tools \
    "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" "./crictl --version" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
}

# --- reference CNI plugins ---------------------------------------------------------------------------
build_cni_plugins() {
  local mod=github.com/containernetworking/plugins pkgs=() p
  for p in $CNI_PLUGINS; do pkgs+=("$mod/plugins/$p@$CNI_PLUGINS_VERSION"); done
  # As upstream's release build (build_linux.sh): static, the version in buildversion.
  PEER_NOTE=": $CNI_PLUGINS" go_install_peer cni-plugins "$CNI_PLUGINS_VERSION" "$mod" \
    "-s -w -X $mod/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" \
    "CNI_COMMAND=VERSION ./bridge </dev/null" "${pkgs[@]}"
}

# --- cnitool (libcni) ---------------------------------------------------------------------------------
build_cnitool() {
  local mod=github.com/containernetworking/cni
  go_install_peer cnitool "$CNITOOL_VERSION" "$mod" "-s -w" "" "$mod/cnitool@$CNITOOL_VERSION"
}

# --- wireguard-go (the wireguard backend's userspace device) -------------------------------------------
build_wireguard_go() {
  local mod=golang.zx2c4.com/wireguard
  # The module's root package is the wireguard-go command (`go install` names the binary `wireguard`).
  PEER_RENAME=wireguard:wireguard-go go_install_peer wireguard-go "$WIREGUARD_GO_VERSION" "$mod" "-s -w" \
    "./wireguard-go --version" "$mod@$WIREGUARD_GO_VERSION"
}

# --- kube-router (the NetworkPolicy peer) ---------------------------------------------------------------
build_kube_router() {
  local mod=github.com/cloudnativelabs/kube-router/v2
  # As upstream's Makefile: static, the version in pkg/version.
  go_install_peer kube-router "$KUBE_ROUTER_VERSION" "$mod" "-s -w -X $mod/pkg/version.Version=$KUBE_ROUTER_VERSION" \
    "./kube-router --version" "$mod/cmd/kube-router@$KUBE_ROUTER_VERSION"
}

main() {
  local what=("$@") w t0
  [ ${#what[@]} -gt 0 ] || what=(crictl cni-plugins cnitool wireguard-go flanneld kubernetes kube-scheduler kube-proxy coredns agnhost e2e kube-router)
  [ "${what[*]}" = versions ] || use_goproxy
  t0=$(now)
  for w in "${what[@]}"; do
    case "$w" in
      kubernetes) with_lock "$CACHE/kubernetes-$K8S_VERSION" build_kubernetes ;;
      kube-scheduler) with_lock "$CACHE/kube-scheduler-$K8S_VERSION" build_kube_cmds kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler ;;
      kube-proxy) with_lock "$CACHE/kube-proxy-$K8S_VERSION" build_kube_cmds kube-proxy k8s.io/kubernetes/cmd/kube-proxy ;;
      agnhost) with_lock "$CACHE/agnhost-$K8S_VERSION" build_kube_cmds agnhost k8s.io/kubernetes/test/images/agnhost ;;
      e2e) with_lock "$CACHE/e2e-$K8S_VERSION" build_kube_cmds e2e k8s.io/kubernetes/test/e2e ;;
      coredns) with_lock "$CACHE/coredns-$COREDNS_VERSION" build_coredns ;;
      flanneld) with_lock "$CACHE/flanneld-$FLANNEL_VERSION" build_flanneld ;;
      crictl) with_lock "$CACHE/crictl-$CRICTL_VERSION" build_crictl ;;
      cni-plugins) with_lock "$CACHE/cni-plugins-$CNI_PLUGINS_VERSION" build_cni_plugins ;;
      cnitool) with_lock "$CACHE/cnitool-$CNITOOL_VERSION" build_cnitool ;;
      wireguard-go) with_lock "$CACHE/wireguard-go-$WIREGUARD_GO_VERSION" build_wireguard_go ;;
      kube-router) with_lock "$CACHE/kube-router-$KUBE_ROUTER_VERSION" build_kube_router ;;
      go) need_go "$GO_TOOLCHAIN_VERSION"; log "go: $GO ($("$GO" env GOVERSION))" ;;
      versions) echo "kubernetes=$K8S_VERSION flanneld=$FLANNEL_VERSION crictl=$CRICTL_VERSION cni-plugins=$CNI_PLUGINS_VERSION cnitool=$CNITOOL_VERSION wireguard-go=$WIREGUARD_GO_VERSION coredns=$COREDNS_VERSION kube-router=$KUBE_ROUTER_VERSION cache=$CACHE" ;;
      *) die "unknown peer '$w' (kubernetes, kube-scheduler, kube-proxy, agnhost, e2e, coredns, flanneld, crictl, cni-plugins, cnitool, wireguard-go, kube-router, go, versions)" ;;
    esac
  done
  log "done in $(($(now) - t0)) s (cache $CACHE)"
}

main "$@"
