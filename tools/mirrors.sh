# tools/mirrors.sh — where packages are fetched from: this machine's own configuration, never a host written
# in the repository, so a user's mirror is respected. Sourced (bash) by deploy/build-image.sh,
# tools/peers/build.sh and tests/install_cni_minimal_host_test.ts; tools/mirrors_test.ts runs each function.
# Each prints its answer on stdout, or one line on stderr naming what to configure and returns 1.

# apt_sources SUITE [FILE...]: mmdebstrap's source lines (`deb [signed-by=KEY] URI SUITE main`) for SUITE,
# SUITE-updates and SUITE-security, from apt's sources: one-line files (`deb [opts] URI SUITE COMPONENT...`,
# *.list) and deb822 files (*.sources: Types/URIs/Suites/Components/Signed-By/Enabled paragraphs). Only
# entries of type deb with the component main count, each once. FILEs default to the machine's:
# /etc/apt/sources.list, /etc/apt/sources.list.d/*.list and *.sources. SUITE itself must be among them.
apt_sources() {
  local suite=$1 f
  shift
  local files=("$@")
  if [ ${#files[@]} -eq 0 ]; then
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] && files+=("$f")
    done
  fi
  local out="" rc=0
  if [ ${#files[@]} -gt 0 ]; then
    out=$(awk -v suite="$suite" '
      function emit(uri, s, key) {
        if (s != suite && s != suite "-updates" && s != suite "-security") return
        sub(/\/+$/, "", uri)
        line = "deb " (key != "" ? "[signed-by=" key "] " : "") uri " " s " main"
        if (!(line in seen)) { seen[line] = 1; print line }
      }
      function has(list, word,   n, i, a) {
        n = split(list, a, /[ \t]+/)
        for (i = 1; i <= n; i++) if (a[i] == word) return 1
        return 0
      }
      # One deb822 paragraph: every URI x every suite, when deb, enabled and with main.
      function flush(   nu, ns, i, j, u, s, key) {
        if (has(f["types"], "deb") && tolower(f["enabled"]) != "no" && has(f["components"], "main")) {
          key = f["signed-by"]
          if (key !~ /^\//) key = ""   # an embedded key (or none): mmdebstrap uses apt'"'"'s keyrings
          nu = split(f["uris"], u, /[ \t]+/)
          ns = split(f["suites"], s, /[ \t]+/)
          for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) if (u[i] != "" && s[j] != "") emit(u[i], s[j], key)
        }
        split("", f)
        field = ""
      }
      FNR == 1 { flush(); deb822 = FILENAME ~ /\.sources$/ }
      deb822 {
        if ($0 ~ /^[ \t]*#/) next
        if ($0 ~ /^[ \t]*$/) { flush(); next }
        if ($0 ~ /^[ \t]/) {   # a continuation line belongs to the field above
          if (field != "") { v = $0; gsub(/^[ \t]+|[ \t]+$/, "", v); f[field] = f[field] " " v }
          next
        }
        i = index($0, ":")
        if (i == 0) next
        field = tolower(substr($0, 1, i - 1))
        v = substr($0, i + 1)
        gsub(/^[ \t]+|[ \t]+$/, "", v)
        f[field] = v
        next
      }
      {
        sub(/#.*/, "")
        n = split($0, w, /[ \t]+/)
        k = 1
        while (k <= n && w[k] == "") k++
        if (k > n || w[k] != "deb") next
        k++
        key = ""
        if (substr(w[k], 1, 1) == "[") {   # [ opt=v ... ], possibly spread over several words
          opts = ""
          while (k <= n) { opts = opts " " w[k]; if (w[k] ~ /\]$/) { k++; break } k++ }
          gsub(/[\[\]]/, " ", opts)
          m = split(opts, o, /[ \t]+/)
          for (j = 1; j <= m; j++) if (o[j] ~ /^signed-by=\//) key = substr(o[j], 11)
        }
        uri = w[k]; s = w[k + 1]
        comps = ""
        for (j = k + 2; j <= n; j++) comps = comps " " w[j]
        if (uri != "" && s != "" && has(comps, "main")) emit(uri, s, key)
      }
      END { flush() }
    ' "${files[@]}") || rc=$?
  fi
  if [ "$rc" != 0 ] || ! grep -q "^deb \(\[[^]]*\] \)\?[^ ]* $suite main\$" <<<"$out"; then
    local read=${files[*]}
    echo "no apt source for Debian $suite main in ${read:-/etc/apt/sources.list*}: add one for your" \
      "mirror (e.g. /etc/apt/sources.list.d/debian.sources: Types: deb, URIs: <mirror>, Suites: $suite," \
      "Components: main)" >&2
    return 1
  fi
  printf '%s\n' "$out"
}

# npm_registry: the npm registry (or mirror) this machine's npm uses: NPM_CONFIG_REGISTRY, else
# `npm config get registry` (~/.npmrc, the global npmrc, npm's own default). Printed with one trailing slash.
npm_registry() {
  local r=${NPM_CONFIG_REGISTRY:-${npm_config_registry:-}}
  if [ -z "$r" ] && command -v npm >/dev/null 2>&1; then
    r=$(npm config get registry 2>/dev/null) || r=""
  fi
  case "$r" in
    http://* | https://*) printf '%s/\n' "${r%/}" ;;
    *)
      echo "no npm registry configured${r:+ (got '${r:0:80}')}: run \`npm config set registry URL\` or set NPM_CONFIG_REGISTRY=URL" >&2
      return 1
      ;;
  esac
}

# go_proxies VALUE: the module proxies (URLs) of a GOPROXY value (what `go env GOPROXY` prints), joined by
# commas: `direct` and `off` dropped, so the go client fetches modules through a proxy only (a module the
# proxy refuses fails the build instead of coming from its VCS).
go_proxies() {
  local v=${1:-}
  local out="" p
  local IFS=',|'
  for p in $v; do
    case "$p" in
      http://* | https://* | file://*) out=${out:+$out,}$p ;;
    esac
  done
  if [ -z "$out" ]; then
    echo "no Go module proxy configured${v:+ (GOPROXY is '${v:0:80}')}: run \`go env -w GOPROXY=URL\` or set GOPROXY=URL" >&2
    return 1
  fi
  printf '%s\n' "$out"
}
