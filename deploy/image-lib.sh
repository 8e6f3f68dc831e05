# deploy/image-lib.sh — sourced by deploy/build-image.sh: "a Debian base + files → an OCI archive", shared by
# flanctl's image and the lab's peer images (kube-proxy, CoreDNS, agnhost: `build-image.sh --peer NAME`).
#
# The caller sets: CACHE, SUITE, MIRRORS (array), BASE_EPOCH, ARCH, MMDEBSTRAP_OPTS (array), DENO, HERE, and
# defines log and die. Nothing here reaches a registry: the base comes from the Debian mirrors the caller
# names, the programs from the dev cache (tools/peers/build.sh).

# image_base PACKAGES: sets `base` to the Debian base (mmdebstrap of PACKAGES) cached under the sha256 of its
# tarball, found through the hash of its inputs (suite, mirrors, packages, options). Builds of one base run one
# at a time (a flock per input hash): a second waits and then finds the first's tarball in the cache.
image_base() {
  local packages=$1 key ref_file sum tmp lock
  mkdir -p "$CACHE"
  key=$(printf '%s\n' "$SUITE" "$packages" "$BASE_EPOCH" "$ARCH" "${MIRRORS[@]}" "${MMDEBSTRAP_OPTS[@]}" \
    "$(dpkg-query -W -f='${Version}' mmdebstrap)" | sha256sum | cut -c1-16)
  ref_file=$CACHE/base-inputs-$key
  exec {lock}>"$CACHE/.base-inputs-$key.lock"
  if ! flock --nonblock "$lock"; then
    log "Debian base: another build of the same base is running; waiting for it"
    flock "$lock"
  fi
  base=""
  if [ "${FLANCTL_IMAGE_REFRESH:-0}" != 1 ] && [ -f "$ref_file" ]; then
    sum=$(cat "$ref_file")
    if [ -f "$CACHE/base-$sum.tar" ] && [ "$(sha256sum <"$CACHE/base-$sum.tar" | cut -d' ' -f1)" = "$sum" ]; then
      base=$CACHE/base-$sum.tar
      log "Debian base: cached $base"
    fi
  fi
  if [ -z "$base" ]; then
    log "Debian base: mmdebstrap $SUITE ($packages)"
    tmp=$CACHE/.base-$$.tar
    SOURCE_DATE_EPOCH=$BASE_EPOCH mmdebstrap --quiet "${MMDEBSTRAP_OPTS[@]}" --include="$packages" \
      "$SUITE" "$tmp" "${MIRRORS[@]}" || { rm -f "$tmp"; die "mmdebstrap failed (see above)"; }
    sum=$(sha256sum <"$tmp" | cut -d' ' -f1)
    mv -f "$tmp" "$CACHE/base-$sum.tar"
    tmp=$(mktemp "$ref_file.XXXXXX")
    printf '%s\n' "$sum" >"$tmp" && mv -f "$tmp" "$ref_file"
    base=$CACHE/base-$sum.tar
    log "Debian base: $base"
  fi
  exec {lock}>&-
}

# image_layer ROOTFS LAYER EPOCH: one layer tar of ROOTFS: names sorted, every mtime = EPOCH, numeric owners,
# no atime/ctime.
image_layer() {
  local r=$1 layer=$2 epoch=$3
  (cd "$r" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort) >"$layer.files"
  tar --create --file "$layer" --directory "$r" --no-recursion --verbatim-files-from \
    --files-from "$layer.files" --numeric-owner --format=pax \
    --pax-option='exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime' --mtime="@$epoch"
  rm -f "$layer.files"
}

# image_archive LAYER OCI_DIR OUT EPOCH OCI_LAYOUT_ARGS...: tools/oci_layout.ts makes the config, manifest and
# index of LAYER in OCI_DIR (the layer moves in); the directory becomes the archive OUT (deterministic).
# Sets `digest` (the manifest's).
image_archive() {
  local layer=$1 oci=$2 out=$3 epoch=$4
  shift 4
  mkdir -p "$oci"
  digest=$(cd "$HERE" && "$DENO" run --quiet --no-config --allow-read --allow-write tools/oci_layout.ts \
    --layer "$layer" --dir "$oci" --created "$epoch" --arch "$ARCH" "$@")
  (cd "$oci" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort) >"$oci.files"
  mkdir -p "$(dirname "$out")"
  tar --create --file "$out.tmp" --directory "$oci" --no-recursion --verbatim-files-from \
    --files-from "$oci.files" --owner=0 --group=0 --numeric-owner --format=pax \
    --pax-option='exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime' --mtime="@$epoch" \
    --mode='u+rw,go+r,go-w'
  rm -f "$oci.files"
  mv -f "$out.tmp" "$out"
}

# The e2e suite's images (agnhost, glibc-dns-testing) share one base: its pods exec these programs.
E2E_PACKAGES=ca-certificates,curl,netcat-openbsd,iproute2,dnsutils,iputils-ping

# image_peer NAME OUT: a peer image of the --kube lab from the dev cache's build (tools/peers/build.sh):
#   kube-proxy  flanctl's Debian base (iptables, nftables, conntrack, kmod, iproute2: what kube-proxy runs) +
#               /usr/local/bin/kube-proxy; named flanctl.local/kube-proxy:<kubernetes version>
#   coredns     /coredns (static) + the base's CA bundle; flanctl.local/coredns:<coredns version>
#   agnhost     a base with curl, netcat-openbsd, iproute2, dnsutils, iputils-ping (the e2e suite execs them in
#               its pods) + /agnhost, `pause` by default; named FLANCTL_AGNHOST_REF (default
#               flanctl.local/e2e/agnhost:<the suite's agnhost tag>)
#   glibc-dns-testing  the same base + /coredns; named FLANCTL_GLIBC_DNS_REF (the suite's glibc DNS prober)
# Prints the image line and digest as flanctl's build does.
image_peer() {
  local name=$1 out=$2 dev=${FLANCTL_DEV_CACHE:-/var/cache/flanctl-dev} versions k8s coredns
  versions=$("$HERE/tools/peers/build.sh" versions 2>/dev/null)
  k8s=$(sed -n 's/.*kubernetes=\([^ ]*\).*/\1/p' <<<"$versions")
  coredns=$(sed -n 's/.*coredns=\([^ ]*\).*/\1/p' <<<"$versions")
  local bin ref version packages="" entry cmd="" dest
  case "$name" in
    kube-proxy)
      bin=$dev/kube-proxy-$k8s/bin/kube-proxy ref=flanctl.local/kube-proxy:$k8s version=$k8s
      packages=$PACKAGES dest=usr/local/bin/kube-proxy entry='["/usr/local/bin/kube-proxy"]' ;;
    coredns)
      bin=$dev/coredns-$coredns/bin/coredns ref=flanctl.local/coredns:$coredns version=$coredns
      dest=coredns entry='["/coredns"]' ;;
    agnhost)
      bin=$dev/agnhost-$k8s/bin/agnhost version=$k8s
      ref=${FLANCTL_AGNHOST_REF:-flanctl.local/e2e/agnhost:2.66.1}
      packages=$E2E_PACKAGES dest=agnhost entry='["/agnhost"]' cmd='["pause"]' ;;
    glibc-dns-testing)
      # The suite's glibc resolver prober: Debian (glibc) with dig, and a /coredns of its own.
      bin=$dev/coredns-$coredns/bin/coredns version=$coredns
      ref=${FLANCTL_GLIBC_DNS_REF:-flanctl.local/e2e/glibc-dns-testing:2.1.1}
      packages=$E2E_PACKAGES dest=coredns entry='[]' cmd='["bash"]' ;;
    *) die "--peer $name: kube-proxy, coredns, agnhost or glibc-dns-testing" ;;
  esac
  [ -x "$bin" ] || die "$bin not found: tools/peers/build.sh ${name} (./install.sh --dev builds it)"
  [ -n "${out:-}" ] || out=$HERE/dist/$name-image.tar
  local work r epoch=$BASE_EPOCH
  work=$(mktemp -d /var/tmp/flanctl-peer-image.XXXXXX)
  r=$work/rootfs
  mkdir -p "$r"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  # The flanctl base also gives CoreDNS its CA bundle (one file: the rest of the base stays out).
  image_base "${packages:-$PACKAGES}"
  if [ -n "$packages" ]; then
    tar -xpf "$base" --numeric-owner -C "$r"
    rm -rf "${r:?}"/dev/* "$r"/var/cache/apt/* "$r"/var/lib/apt/lists/* "$r"/var/cache/ldconfig/aux-cache \
      "$r"/var/cache/debconf/*-old "$r"/var/lib/dpkg/*-old
    find "$r/var/log" -type f -delete
  else
    tar -xpf "$base" --numeric-owner -C "$r" ./etc/ssl/certs/ca-certificates.crt
    chmod 0755 "$r" "$r/etc" "$r/etc/ssl" "$r/etc/ssl/certs"
  fi
  install -D -m 0755 "$bin" "$r/$dest"
  image_layer "$r" "$work/layer.tar" "$epoch"
  image_archive "$work/layer.tar" "$work/oci" "$out" "$epoch" --ref "$ref" --version "$version" \
    --entrypoint "$entry" ${cmd:+--cmd "$cmd"} --title "$name" \
    --description "$name $version for flanctl's lab (built by tools/peers/build.sh, no registry)" \
    --created-by "deploy/build-image.sh --peer $name"
  log "built $out"
  printf 'image     %s\n' "$ref"
  printf 'digest    %s\n' "$digest"
  printf 'archive   %s (%s bytes)\n' "$out" "$(stat -c %s "$out")"
}
