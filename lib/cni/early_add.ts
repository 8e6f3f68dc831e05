/**
 * portmap's ADD of a pod without port mappings, answered by the launcher before Deno starts (docs/cni.md,
 * "portmap's ADD without port mappings"). That ADD makes nothing: the full plugin validates the config,
 * prints prevResult in the config's cniVersion and fills the attachment's deleted record
 * (lib/cni/deleted.ts), yet it cost a whole Deno start on the critical path of every pod start.
 *
 * {@link earlyAddSh} gives the POSIX sh lines: when the environment is one the full path accepts, mawk
 * ({@link EARLY_ADD_AWK}) reads the config, at most {@link EARLY_ADD_MAX_BYTES} + 1 bytes (through GNU head,
 * which never reads past its count), and decides. It answers only a config it fully understands (every
 * check below), renders the result as lib/cni/result.ts's formatResult does, byte for byte, and otherwise
 * says "full" ("more" when it hit the limit). Its output is `read` (once its probe passed, before reading), a
 * verdict line, the answer line when early, then the config's bytes exactly as read (NULs and a missing final
 * newline included: the record separator never matches), so that whatever falls through (a "full" verdict, a
 * record that cannot be written) starts Deno on the same stdin: the replay, followed by the rest of the
 * runtime's stdin after "more". Without `read` (the probe said `skip`, mawk never started) nothing read stdin
 * and Deno gets it untouched; `read` without a verdict (mawk killed mid-read) is answered with
 * {@link READER_DIED}, as part of the config is gone. The launcher answers only after it wrote the record.
 *
 * What the awk program accepts (anything else: "full"): at most {@link EARLY_ADD_MAX_BYTES}, valid JSON
 * nested at most 32 deep, no NUL, no `__proto__` key, strings of ASCII, valid UTF-8 and escapes (`\u` only
 * below U+0080); a top-level object whose keys that the full path reads (as Go's case fold matches them:
 * cniVersion, name, runtimeConfig, prevResult, snat, masqAll, markMasqBit, backend) are spelled exactly and
 * once, and none of externalSetMarkChain, conditionsV4, conditionsV6 (their backend check depends on the
 * host's tools); cniVersion 0.3.0–1.1.0; a valid network name; runtimeConfig absent or an object whose
 * portMappings is absent or `[]` (libcni leaves it out when the runtime passes no mappings, go-cni may pass
 * an empty list); snat/masqAll true or false; markMasqBit 0–31; backend iptables or nftables; a prevResult
 * object with the config's cniVersion and only the fields of a result (interfaces, ips, routes, dns and
 * theirs), each of the type the full path keeps, numbers plain integers.
 * @module
 */
import { shQuote } from "./launch.ts";
import { CURRENT_VERSION, ErrCode } from "./spec.ts";

/** The largest config the launcher answers itself (mawk reads one byte more, no further); a real one is 1–3 KiB. */
export const EARLY_ADD_MAX_BYTES = 16384;

/**
 * The launcher's answer when mawk said it started reading and then gave no verdict (killed, out of memory):
 * part of the config is consumed, so no plugin can see it whole; the runtime retries or reports the error.
 */
export const READER_DIED = JSON.stringify({
  cniVersion: CURRENT_VERSION,
  code: ErrCode.IOFailure,
  msg: "the early reader died reading stdin",
  details: "the launcher's mawk (portmap's ADD without port mappings) ended before its verdict, " +
    "with part of the network config read: the plugin did not run",
});

/**
 * The awk program, for mawk (Debian's awk; only mawk is run: the replay's NUL-safety and separator were
 * checked on it) in the C locale, all in BEGIN (it never reads its own stdin): a probe first (strings hold
 * NULs, `^` inside the separator is an anchor), and when it fails it prints `skip`. Otherwise it prints `read`,
 * reads `head -c MAX+1`'s output (the runtime's stdin) as one record, and prints `more` when that hit the
 * limit, else `early` and the result line, or `full`; then the input unchanged. A head that fails: no verdict.
 */
export const EARLY_ADD_AWK = String.raw`
BEGIN { RS = "x^y"; E["b"] = 1; E["f"] = 1; E["n"] = 1; E["r"] = 1; E["t"] = 1
  if (length("a" sprintf("%c", 0) "b") != 3 || "x^y" ~ RS || "ax^yb" ~ RS) { printf "skip\n"; exit }
  split("cniVersion name runtimeConfig prevResult snat masqAll markMasqBit backend externalSetMarkChain conditionsV4 conditionsV6", a, " ")
  for (i in a) READ[tolower(a[i])] = a[i]
  UTF8 = "^([\302-\337][\200-\277]|\340[\240-\277][\200-\277]|[\341-\354\356\357][\200-\277][\200-\277]|\355[\200-\237][\200-\277]|\360[\220-\277][\200-\277][\200-\277]|[\361-\363][\200-\277][\200-\277][\200-\277]|\364[\200-\217][\200-\277][\200-\277])"
  printf "read\n"; fflush()
  c = "exec head -c " (MAX + 1); s = ""
  if ((c | getline s) < 0 || close(c) != 0) exit 1
  if (length(s) > MAX) { printf "more\n%s", s; exit }
  r = decide(); if (r == "") printf "full\n"; else printf "early\n%s\n", r; printf "%s", s; exit }
function fail() { return 0 }
function ws() { while (p <= n && index(" \t\n\r", substr(s, p, 1)) > 0) p++ }
function hex(h,   i, v) { v = 0; h = tolower(h); for (i = 1; i <= 4; i++) v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1; return v }
function pstr(   o, r, c, m, v) {
  if (substr(s, p, 1) != "\"") return fail()
  p++; o = ""; r = ""
  for (;;) {
    if (match(substr(s, p, 256), /^[^"\\\001-\037\200-\377]+/)) { m = substr(s, p, RLENGTH); o = o m; r = r m; p += RLENGTH; continue }
    c = substr(s, p, 1)
    if (c == "\"") { p++; SO = "\"" o "\""; SR = r; return 1 }
    if (c == "\\") {
      c = substr(s, p + 1, 1)
      if (c == "\"" || c == "\\") { o = o "\\" c; r = r c; p += 2; continue }
      if (c == "/") { o = o "/"; r = r "/"; p += 2; continue }
      if (c in E) { o = o "\\" c; r = r "?"; p += 2; continue }
      if (c != "u" || !match(substr(s, p + 2, 4), /^[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]$/)) return fail()
      v = hex(substr(s, p + 2, 4)); p += 6
      if (v >= 128) return fail()
      if (v == 34) { o = o "\\\""; r = r "\"" }
      else if (v == 92) { o = o "\\\\"; r = r "\\" }
      else if (v == 8) { o = o "\\b"; r = r "?" }
      else if (v == 9) { o = o "\\t"; r = r "?" }
      else if (v == 10) { o = o "\\n"; r = r "?" }
      else if (v == 12) { o = o "\\f"; r = r "?" }
      else if (v == 13) { o = o "\\r"; r = r "?" }
      else if (v < 32) { o = o sprintf("\\u%04x", v); r = r "?" }
      else { o = o sprintf("%c", v); r = r sprintf("%c", v) }
      continue
    }
    if (match(substr(s, p, 4), UTF8)) { m = substr(s, p, RLENGTH); o = o m; r = r m; p += RLENGTH; continue }
    return fail()
  }
}
function pval(path, d,   c, k, i) {
  if (d > 32) return fail()
  ws(); c = substr(s, p, 1)
  if (c == "{") {
    T[path] = "o"; KEYS[path] = ""; p++; ws()
    if (substr(s, p, 1) == "}") { p++; return 1 }
    for (;;) {
      ws(); if (!pstr()) return 0
      k = SR
      if (k == "__proto__" || index(k, SUBSEP) > 0 || ((path SUBSEP k) in T)) return fail()
      ws(); if (substr(s, p, 1) != ":") return fail()
      p++
      if (!pval(path SUBSEP k, d + 1)) return 0
      KEYS[path] = KEYS[path] SUBSEP k
      ws(); c = substr(s, p, 1); p++
      if (c == "}") return 1
      if (c != ",") return fail()
    }
  }
  if (c == "[") {
    T[path] = "a"; p++; ws(); i = 0
    if (substr(s, p, 1) == "]") { p++; N[path] = 0; return 1 }
    for (;;) {
      if (!pval(path SUBSEP i, d + 1)) return 0
      i++; ws(); c = substr(s, p, 1); p++
      if (c == "]") { N[path] = i; return 1 }
      if (c != ",") return fail()
    }
  }
  if (c == "\"") { if (!pstr()) return 0; T[path] = "s"; V[path] = SO; R[path] = SR; return 1 }
  if (match(substr(s, p, 64), /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/)) {
    if (RLENGTH >= 60) return fail()
    T[path] = "n"; V[path] = substr(s, p, RLENGTH); p += RLENGTH; return 1
  }
  if (substr(s, p, 4) == "true") { T[path] = "t"; p += 4; return 1 }
  if (substr(s, p, 5) == "false") { T[path] = "f"; p += 5; return 1 }
  if (substr(s, p, 4) == "null") { T[path] = "z"; p += 4; return 1 }
  return fail()
}
function keys(path, allowed,   ks, i, c) {
  c = split(substr(KEYS[path], 2), ks, SUBSEP)
  for (i = 1; i <= c; i++) if (ks[i] == "" || index(ks[i], " ") > 0 || index(" " allowed " ", " " ks[i] " ") == 0) return 0
  return 1
}
function isint(path) { return T[path] == "n" && V[path] ~ /^(0|-?[1-9][0-9]?[0-9]?[0-9]?[0-9]?[0-9]?[0-9]?[0-9]?[0-9]?[0-9]?[0-9]?[0-9]?[0-9]?[0-9]?[0-9]?)$/ }
function typ(path, t) { return !(path in T) || T[path] == t }
function strs(path,   i) {
  if (!(path in T)) return 1
  if (T[path] != "a") return 0
  for (i = 0; i < N[path]; i++) if (T[path SUBSEP i] != "s") return 0
  return 1
}
function list(path,   i, o) {
  o = ""
  for (i = 0; i < N[path]; i++) o = o (i ? "," : "") V[path SUBSEP i]
  return "[" o "]"
}
function field(o, k, v) { return o (o == "" ? "" : ",") "\"" k "\":" v }
function nonempty(path) { return (path in T) && R[path] != "" }
function iface(x, ver,   o) {
  if (T[x] != "o" || !keys(x, "name mac mtu sandbox socketPath pciID") || T[x SUBSEP "name"] != "s") return ""
  if (!typ(x SUBSEP "mac", "s") || !typ(x SUBSEP "sandbox", "s") || !typ(x SUBSEP "socketPath", "s") || !typ(x SUBSEP "pciID", "s")) return ""
  if ((x SUBSEP "mtu") in T && !isint(x SUBSEP "mtu")) return ""
  o = ""
  if (ver < "1") {
    o = field(o, "name", V[x SUBSEP "name"])
    if (nonempty(x SUBSEP "mac")) o = field(o, "mac", V[x SUBSEP "mac"])
    if (nonempty(x SUBSEP "sandbox")) o = field(o, "sandbox", V[x SUBSEP "sandbox"])
    return "{" o "}"
  }
  if (nonempty(x SUBSEP "mac")) o = field(o, "mac", V[x SUBSEP "mac"])
  if (ver == "1.1.0" && (x SUBSEP "mtu") in T && V[x SUBSEP "mtu"] != "0") o = field(o, "mtu", V[x SUBSEP "mtu"])
  o = field(o, "name", V[x SUBSEP "name"])
  if (ver == "1.1.0" && nonempty(x SUBSEP "pciID")) o = field(o, "pciID", V[x SUBSEP "pciID"])
  if (nonempty(x SUBSEP "sandbox")) o = field(o, "sandbox", V[x SUBSEP "sandbox"])
  if (ver == "1.1.0" && nonempty(x SUBSEP "socketPath")) o = field(o, "socketPath", V[x SUBSEP "socketPath"])
  return "{" o "}"
}
function ip(x, ver,   o) {
  if (T[x] != "o" || !keys(x, "interface address gateway version") || T[x SUBSEP "address"] != "s") return ""
  if (!typ(x SUBSEP "gateway", "s") || !typ(x SUBSEP "version", "s")) return ""
  if ((x SUBSEP "interface") in T && !isint(x SUBSEP "interface")) return ""
  o = ""
  if (ver < "1") o = field(o, "version", index(R[x SUBSEP "address"], ":") ? "\"6\"" : "\"4\"")
  if (ver < "1" && (x SUBSEP "interface") in T) o = field(o, "interface", V[x SUBSEP "interface"])
  o = field(o, "address", V[x SUBSEP "address"])
  if (nonempty(x SUBSEP "gateway")) o = field(o, "gateway", V[x SUBSEP "gateway"])
  if (ver >= "1" && (x SUBSEP "interface") in T) o = field(o, "interface", V[x SUBSEP "interface"])
  return "{" o "}"
}
function route(x, ver,   o, i, a, c) {
  if (T[x] != "o" || !keys(x, "dst gw mtu advmss priority table scope") || T[x SUBSEP "dst"] != "s") return ""
  if (!typ(x SUBSEP "gw", "s")) return ""
  c = split("advmss mtu priority scope table", a, " ")
  for (i = 1; i <= c; i++) if ((x SUBSEP a[i]) in T && !isint(x SUBSEP a[i])) return ""
  o = ""
  if (ver == "1.1.0" && (x SUBSEP "advmss") in T) o = field(o, "advmss", V[x SUBSEP "advmss"])
  o = field(o, "dst", V[x SUBSEP "dst"])
  if (nonempty(x SUBSEP "gw")) o = field(o, "gw", V[x SUBSEP "gw"])
  if (ver == "1.1.0") {
    c = split("mtu priority scope table", a, " ")
    for (i = 1; i <= c; i++) if ((x SUBSEP a[i]) in T) o = field(o, a[i], V[x SUBSEP a[i]])
  }
  return "{" o "}"
}
function items(x, kind, ver,   i, o, e) {
  o = ""
  for (i = 0; i < N[x]; i++) {
    if (kind == "i") e = iface(x SUBSEP i, ver); else if (kind == "p") e = ip(x SUBSEP i, ver); else e = route(x SUBSEP i, ver)
    if (e == "") return ""
    o = o (i ? "," : "") e
  }
  return "[" o "]"
}
function dns(x, ver,   o) {
  if (!(x in T)) return ver < "1" ? "{}" : "-"
  if (T[x] != "o" || !keys(x, "nameservers domain search options") || !typ(x SUBSEP "domain", "s")) return ""
  if (!strs(x SUBSEP "nameservers") || !strs(x SUBSEP "search") || !strs(x SUBSEP "options")) return ""
  o = ""
  if (ver < "1") {
    if (N[x SUBSEP "nameservers"] > 0) o = field(o, "nameservers", list(x SUBSEP "nameservers"))
    if (nonempty(x SUBSEP "domain")) o = field(o, "domain", V[x SUBSEP "domain"])
    if (N[x SUBSEP "search"] > 0) o = field(o, "search", list(x SUBSEP "search"))
    if (N[x SUBSEP "options"] > 0) o = field(o, "options", list(x SUBSEP "options"))
    return "{" o "}"
  }
  if (nonempty(x SUBSEP "domain")) o = field(o, "domain", V[x SUBSEP "domain"])
  if (N[x SUBSEP "nameservers"] > 0) o = field(o, "nameservers", list(x SUBSEP "nameservers"))
  if (N[x SUBSEP "options"] > 0) o = field(o, "options", list(x SUBSEP "options"))
  if (N[x SUBSEP "search"] > 0) o = field(o, "search", list(x SUBSEP "search"))
  return o == "" ? "-" : "{" o "}"
}
function decide(   ks, c, i, k, lk, rc, ver, x, o, part) {
  n = length(s)
  if (n > MAX || index(s, "\0") > 0) return ""
  p = 1
  if (!pval("R", 1)) return ""
  ws()
  if (p <= n || T["R"] != "o") return ""
  c = split(substr(KEYS["R"], 2), ks, SUBSEP)
  for (i = 1; i <= c; i++) {
    k = ks[i]
    if (k ~ /[\200-\377]/) return ""
    lk = tolower(k)
    if (lk in READ && (k != READ[lk] || lk ~ /^(externalsetmarkchain|conditionsv4|conditionsv6)$/)) return ""
  }
  ver = R["R" SUBSEP "cniVersion"]
  if (T["R" SUBSEP "cniVersion"] != "s" || ver !~ /^(0\.3\.0|0\.3\.1|0\.4\.0|1\.0\.0|1\.1\.0)$/) return ""
  if (T["R" SUBSEP "name"] != "s" || R["R" SUBSEP "name"] !~ /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/) return ""
  rc = "R" SUBSEP "runtimeConfig"
  if (rc in T) {
    if (T[rc] != "o") return ""
    c = split(substr(KEYS[rc], 2), ks, SUBSEP)
    for (i = 1; i <= c; i++) if (ks[i] ~ /[\200-\377]/ || (tolower(ks[i]) == "portmappings" && ks[i] != "portMappings")) return ""
    if ((rc SUBSEP "portMappings") in T && (T[rc SUBSEP "portMappings"] != "a" || N[rc SUBSEP "portMappings"] != 0)) return ""
  }
  if (("R" SUBSEP "snat") in T && T["R" SUBSEP "snat"] != "t" && T["R" SUBSEP "snat"] != "f") return ""
  if (("R" SUBSEP "masqAll") in T && T["R" SUBSEP "masqAll"] != "t" && T["R" SUBSEP "masqAll"] != "f") return ""
  if (("R" SUBSEP "markMasqBit") in T && (T["R" SUBSEP "markMasqBit"] != "n" || V["R" SUBSEP "markMasqBit"] !~ /^([0-9]|[12][0-9]|3[01])$/)) return ""
  if (("R" SUBSEP "backend") in T && (T["R" SUBSEP "backend"] != "s" || R["R" SUBSEP "backend"] !~ /^(iptables|nftables)$/)) return ""
  x = "R" SUBSEP "prevResult"
  if (T[x] != "o" || !keys(x, "cniVersion interfaces ips routes dns")) return ""
  if (T[x SUBSEP "cniVersion"] != "s" || R[x SUBSEP "cniVersion"] != ver) return ""
  o = field("", "cniVersion", "\"" ver "\"")
  part = dns(x SUBSEP "dns", ver)
  if (part == "") return ""
  if (ver >= "1" && part != "-") o = field(o, "dns", part)
  if (!typ(x SUBSEP "interfaces", "a") || !typ(x SUBSEP "ips", "a") || !typ(x SUBSEP "routes", "a")) return ""
  if (N[x SUBSEP "interfaces"] > 0) { k = items(x SUBSEP "interfaces", "i", ver); if (k == "") return ""; o = field(o, "interfaces", k) }
  if (N[x SUBSEP "ips"] > 0) { k = items(x SUBSEP "ips", "p", ver); if (k == "") return ""; o = field(o, "ips", k) }
  if (N[x SUBSEP "routes"] > 0) { k = items(x SUBSEP "routes", "r", ver); if (k == "") return ""; o = field(o, "routes", k) }
  if (ver < "1") o = field(o, "dns", part)
  return "{" o "}"
}
`;

/**
 * The POSIX sh lines a CNI launcher runs before starting Deno, after {@link earlyDelSh}'s: portmap's ADD
 * without port mappings, answered when the environment is one the full path accepts (CNI_CONTAINERID,
 * CNI_NETNS, CNI_IFNAME and CNI_PATH set; the ID and name of letters, digits, `_`, `.`, `-`, the name at
 * most 15 bytes, the record's file name at most 255), the records' directory `dir` exists and is writable,
 * mawk and head are there, and {@link EARLY_ADD_AWK} says early: then the record (lib/cni/deleted.ts) is
 * filled, as the full ADD fills it, and the result printed, exit 0. Otherwise `exec` (the launcher's command
 * that starts Deno, with `exec`) runs once, on the config's bytes, unchanged, and its exit status is the
 * launcher's; or, when mawk died reading, {@link READER_DIED} is printed, exit 1. When the environment does
 * not qualify, these lines do nothing and the launcher goes on. The plugin name must be one of ours; the
 * launcher's `case` makes sure.
 */
export function earlyAddSh(dir: string, exec: string): string {
  const rec = `${shQuote(dir)}/"portmap:$flanctl_if:$flanctl_id"`;
  return [
    'if [ "${0##*/}" = portmap ] && [ "${CNI_COMMAND:-}" = ADD ]; then',
    "  flanctl_id=${CNI_CONTAINERID:-} flanctl_if=${CNI_IFNAME:-}",
    '  case "$flanctl_id" in [!A-Za-z0-9]*|*[!A-Za-z0-9_.-]*) flanctl_id= ;; esac',
    '  case "$flanctl_if" in .|..|*[!A-Za-z0-9_.-]*) flanctl_if= ;; esac',
    '  if [ -n "$flanctl_id" ] && [ -n "$flanctl_if" ] && [ -n "${CNI_NETNS:-}" ] && [ -n "${CNI_PATH:-}" ] &&',
    "    [ ${#flanctl_if} -le 15 ] && [ $((${#flanctl_id} + ${#flanctl_if})) -le 246 ] &&",
    `    [ -d ${shQuote(dir)} ] && [ -w ${shQuote(dir)} ] && command -v mawk >/dev/null 2>&1 &&`,
    "    command -v head >/dev/null 2>&1; then",
    // fd 3: the runtime's stdin, for what mawk's head did not read (or all of it when nothing read).
    `    { LC_ALL=C mawk -v MAX=${EARLY_ADD_MAX_BYTES} ${shQuote(EARLY_ADD_AWK)} 3<&- | {`,
    "      IFS= read -r flanctl_v",
    // No `read` line (the probe said skip, or mawk never started): nothing read stdin, Deno gets all of it.
    `      [ "$flanctl_v" = read ] || { exec <&3 3<&-; ${exec}; exit; }`,
    "      IFS= read -r flanctl_v",
    // `read` without a verdict: mawk died reading (killed, out of memory), part of stdin is gone.
    '      case "$flanctl_v" in early|full|more) ;; *)',
    `        printf '%s\n' ${shQuote(READER_DIED)}; exit 1 ;;`,
    "      esac",
    '      if [ "$flanctl_v" = early ] && IFS= read -r flanctl_r && { [ ! -e ' + rec + " ] || [ -f " + rec +
    " ]; } &&",
    `        { printf 'deleted\n' >${rec}; } 2>/dev/null; then`,
    `        printf '%s\n' "$flanctl_r"; exit 0`,
    "      fi",
    // Over the limit: Deno reads mawk's replay, then the rest of the runtime's stdin.
    '      if [ "$flanctl_v" = more ]; then',
    `        { cat; exec cat <&3; } | { exec 3<&-; ${exec}; }`,
    "      else",
    `        exec 3<&-; ${exec}`,
    "      fi",
    "    }; } 3<&0",
    "    exit",
    "  fi",
    "fi",
  ].join("\n");
}
