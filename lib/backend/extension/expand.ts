/**
 * How flanneld's extension backend turns a configured command into an argv (flannel
 * pkg/backend/extension, v0.28.10): the text is split on white space (Go's `strings.Fields`), then every
 * field has `$VAR` / `${VAR}` replaced from the environment the command gets (Go's `os.Expand`). No shell:
 * a value with spaces or shell metacharacters stays one literal argument.
 * @module
 */

/** The white space of Go's `unicode.IsSpace` (JavaScript's `\s` has U+FEFF and lacks U+0085). */
const GO_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;

/** Go's `strings.TrimSpace`: `s` without leading and trailing Go white space. */
export function goTrimSpace(s: string): string {
  return s.replace(GO_SPACE_START, "").replace(GO_SPACE_END, "");
}

const GO_SPACE_START = new RegExp(`^(?:${GO_SPACE.source})`);
const GO_SPACE_END = new RegExp(`(?:${GO_SPACE.source})$`);

/** Go's `strings.Fields`: the runs of non-space characters. */
export function goFields(s: string): string[] {
  return s.split(GO_SPACE).filter((f) => f !== "");
}

const isSpecial = (c: string) => "*#$@!?-0123456789".includes(c);
const isAlnum = (c: string) => /^[A-Za-z0-9_]$/.test(c);

/** Go's getShellName: the variable name after a `$` and how many characters it spans ("" = none). */
function shellName(s: string): [string, number] {
  if (s[0] === "{") {
    if (s.length > 2 && isSpecial(s[1]) && s[2] === "}") return [s[1], 3];
    for (let i = 1; i < s.length; i++) {
      if (s[i] === "}") return i === 1 ? ["", 2] : [s.slice(1, i), i + 1];
    }
    return ["", 1];
  }
  if (isSpecial(s[0])) return [s[0], 1];
  let i = 0;
  while (i < s.length && isAlnum(s[i])) i++;
  return [s.slice(0, i), i];
}

/**
 * Go's `os.Expand`: `$NAME`, `${NAME}` and the one-character specials (`$1`, `$$`, …) replaced by
 * `lookup(NAME)` (unset: ""); a `$` followed by nothing of a name stays; bad `${…` syntax is dropped as
 * Go drops it.
 */
export function goExpand(s: string, lookup: (name: string) => string): string {
  let out = "", i = 0;
  for (let j = 0; j < s.length; j++) {
    if (s[j] !== "$" || j + 1 >= s.length) continue;
    out += s.slice(i, j);
    const [name, w] = shellName(s.slice(j + 1));
    if (name === "" && w > 0) { /* bad syntax: eaten */ }
    else if (name === "") out += "$";
    else out += lookup(name);
    j += w;
    i = j + 1;
  }
  return i === 0 ? s : out + s.slice(i);
}

/** The argv flanneld runs for `command` with environment `env` (split first, then each field expanded). */
export function commandArgv(command: string, env: Readonly<Record<string, string>>): string[] {
  return goFields(command).map((f) => goExpand(f, (k) => Object.hasOwn(env, k) ? env[k] : ""));
}
