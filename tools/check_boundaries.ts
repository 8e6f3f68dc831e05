/**
 * The boundary gate of `deno task gate` (`deno task boundaries`): fails (exit 1) when product code
 * (main.ts, mod.ts, cli/, lib/; unit tests left out) crosses one of the project's two code boundaries,
 * printing each place as `file:line: what; rule`:
 *
 * - FFI stays in the OS layer: `Deno.dlopen` and the `Deno.Unsafe*` pointer APIs only in lib/sys (the
 *   libc/libnl symbol tables, lib/sys/ffi.ts, and the syscalls on them), lib/netlink (the kernel objects
 *   it reads and writes over those tables) and the udp data path's workers (lib/backend/udp/worker/:
 *   the addresses of its own packet buffers); pointers never leave them. lib/sys is imported only by
 *   lib/netlink, lib/os (its pointer-free facade of the other OS calls) and lib/backend/udp; the rest of
 *   the product reaches kernel objects through lib/netlink/mod.ts (an `import type` of
 *   lib/netlink/types.ts, the layer's declared types, aside) and every other OS call through lib/os/mod.ts
 *   (or lib/os/netns.ts and lib/os/nftables.ts, its netns and libnftables calls alone, for the CNI path that
 *   pays for each module it loads);
 *   {@link NETLINK_INTERNAL_ALLOWED} would list exceptions (none now).
 * - lib/netlink/fake (the in-memory NetlinkHandle) and every other `lib/<area>/fake` folder (lib/observe/fake:
 *   an offline NodeSnapshot) are for unit tests: no product module imports them; nor
 *   fast-check, the property tests' library (tests/ is the cycle check's: product code never imports it).
 * - lib/doctor/checks is the doctor's own: nothing outside lib/doctor imports it. What a node looks like is
 *   read from lib/observe (the snapshot and its probes); a check's finding is reached through
 *   lib/doctor/mod.ts.
 * - Library code never prints: no `console.*`, `Deno.stdout` or `Deno.stderr` in lib/ outside the output
 *   layers: the daemon's Logger (lib/base/log.ts), the warning sinks of command-line callers
 *   (lib/base/warn.ts), the terminal renderers (lib/base/ui/) and the CNI executable's protocol I/O (lib/cni/skel.ts:
 *   the result on stdout, as the CNI spec says). Everything else takes the Logger or a `warn` callback.
 *
 * Reads the code with the TypeScript parser, so a name in a comment or a string does not count. Tests,
 * benches and tools are free (a test fixture may dlopen libc to read malloc statistics).
 * @module
 */
import ts from "typescript";
import { productFiles, ROOT } from "./ts_files.ts";

/** One crossing of a boundary. */
export interface Violation {
  file: string;
  /** 1-based line. */
  line: number;
  /** The expression, e.g. `Deno.dlopen` or `console.error`. */
  what: string;
  /** The rule it breaks. */
  rule: string;
}

const FFI_APIS = new Set([
  "dlopen",
  "UnsafePointer",
  "UnsafePointerView",
  "UnsafeFnPointer",
  "UnsafeCallback",
]);
const FFI_RULE =
  "FFI only in lib/sys and lib/netlink (lib/netlink/mod.ts and lib/os/mod.ts export what others need, without pointers)";
const NETLINK_RULE = "lib/netlink is reached through its mod.ts (export what is needed there)";

/** Modules still importing lib/netlink internals directly (none now; an entry is an open item, not a licence). */
export const NETLINK_INTERNAL_ALLOWED = new Set<string>([]);
/** The kernel layer's public face. */
const NETLINK_FACES = ["lib/netlink/mod.ts"];
const SYS_RULE =
  "lib/sys is imported by lib/netlink, lib/os and lib/backend/udp only (others: lib/netlink/mod.ts, lib/os/mod.ts)";
/** The rule broken by importing the test-only fakes of `folder` (e.g. lib/netlink/fake). */
const fakeRule = (folder: string) => `${folder} is for unit tests: product code never imports it`;
const TEST_RULE = "fast-check is the property tests' library: product code never imports it";
const CHECKS_RULE =
  "nothing outside lib/doctor imports lib/doctor/checks (read lib/observe; findings via lib/doctor/mod.ts)";
/** The layers that may import lib/sys directly. */
const SYS_USERS = ["lib/sys/", "lib/netlink/", "lib/os/", "lib/backend/udp/"];
const PRINT_RULE = "library code never prints: take the Logger or a warn callback (lib/base/warn.ts)";

/** Modules of lib/ allowed to write to the terminal (see the module doc). */
const PRINT_LAYERS = ["lib/base/log.ts", "lib/base/warn.ts", "lib/base/ui/", "lib/cni/skel.ts"];

/** Where FFI may be used: the OS layer, the kernel layer, and the udp worker's own buffer addresses. */
const FFI_LAYERS = ["lib/sys/", "lib/netlink/", "lib/backend/udp/worker/"];
const ffiAllowed = (file: string) =>
  FFI_LAYERS.some((p) => p.endsWith("/") ? file.startsWith(p) : file === p);
const printAllowed = (file: string) =>
  !file.startsWith("lib/") || PRINT_LAYERS.some((p) => p.endsWith("/") ? file.startsWith(p) : file === p);

/** `spec` imported from `file` as a project path (`lib/sys/tun.ts`), or null when it is not relative. */
function resolveImport(file: string, spec: string): string | null {
  if (!spec.startsWith(".")) return null;
  const parts = file.split("/").slice(0, -1);
  for (const p of spec.split("/")) {
    if (p === "..") parts.pop();
    else if (p !== ".") parts.push(p);
  }
  return parts.join("/");
}

/** Whether an import of `target` from `file` crosses into lib/netlink's internals. */
function netlinkInternal(file: string, target: string | null, typeOnly: boolean): boolean {
  if (!target?.startsWith("lib/netlink/") || file.startsWith("lib/netlink/")) return false;
  if (NETLINK_INTERNAL_ALLOWED.has(file) || NETLINK_FACES.includes(target)) return false;
  return !(typeOnly && target === "lib/netlink/types.ts");
}

/**
 * The fakes folder (`lib/<area>/fake`: lib/netlink/fake, lib/observe/fake) an import of `target` from `file`
 * brings into product code, or null: the fakes are for unit tests, and a fake may import another.
 */
function fakeImport(file: string, target: string | null): string | null {
  if (FAKES.test(file)) return null;
  return FAKES.exec(target ?? "")?.[1] ?? null;
}

/** A module in a fakes folder: `lib/<area>[/…]/fake/…` (the first `fake` folder on the path). */
const FAKES = /^(lib\/(?:[^/]+\/)*?fake)\//;

/** Whether `spec` is the property-test library (the import map's name or the npm specifier). */
function testImport(spec: string): boolean {
  return spec === "fast-check" || spec.startsWith("fast-check/") || spec.startsWith("npm:fast-check");
}

/** Whether an import of `target` from `file` reaches into the doctor's checks from outside lib/doctor. */
function doctorChecksInternal(file: string, target: string | null): boolean {
  return !!target?.startsWith("lib/doctor/checks/") && !file.startsWith("lib/doctor/");
}

/** Whether an import of `target` from `file` reaches into lib/sys from outside its users. */
function sysInternal(file: string, target: string | null): boolean {
  return !!target?.startsWith("lib/sys/") && !SYS_USERS.some((p) => file.startsWith(p));
}

/** The boundary crossings of one source text (`file` relative to the project root). */
export function violations(file: string, text: string): Violation[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: Violation[] = [];
  const add = (node: ts.Node, what: string, rule: string) =>
    out.push({ file, line: sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1, what, rule });
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier) {
      const spec = (node.moduleSpecifier as ts.StringLiteral).text;
      const typeOnly = ts.isImportDeclaration(node)
        ? !!node.importClause?.isTypeOnly ||
          (!!node.importClause && !node.importClause.name && !!node.importClause.namedBindings &&
            ts.isNamedImports(node.importClause.namedBindings) &&
            node.importClause.namedBindings.elements.every((e) => e.isTypeOnly))
        : node.isTypeOnly;
      const what = `${ts.isImportDeclaration(node) ? "import" : "export"} from ${spec}`;
      const fake = fakeImport(file, resolveImport(file, spec));
      if (fake) add(node, what, fakeRule(fake));
      else if (netlinkInternal(file, resolveImport(file, spec), typeOnly)) add(node, what, NETLINK_RULE);
      if (testImport(spec)) add(node, what, TEST_RULE);
      if (sysInternal(file, resolveImport(file, spec))) add(node, what, SYS_RULE);
      if (doctorChecksInternal(file, resolveImport(file, spec))) add(node, what, CHECKS_RULE);
    }
    if (
      ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments.length === 1 && ts.isStringLiteral(node.arguments[0])
    ) {
      const spec = node.arguments[0].text;
      const fake = fakeImport(file, resolveImport(file, spec));
      if (fake) add(node, `import(${spec})`, fakeRule(fake));
      else if (netlinkInternal(file, resolveImport(file, spec), false)) {
        add(node, `import(${spec})`, NETLINK_RULE);
      }
      if (testImport(spec)) add(node, `import(${spec})`, TEST_RULE);
      if (sysInternal(file, resolveImport(file, spec))) add(node, `import(${spec})`, SYS_RULE);
      if (doctorChecksInternal(file, resolveImport(file, spec))) add(node, `import(${spec})`, CHECKS_RULE);
    }
    if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression)) {
      const obj = node.expression.text, prop = node.name.text;
      if (obj === "Deno" && FFI_APIS.has(prop) && !ffiAllowed(file)) add(node, `Deno.${prop}`, FFI_RULE);
      if (obj === "Deno" && (prop === "stdout" || prop === "stderr") && !printAllowed(file)) {
        add(node, `Deno.${prop}`, PRINT_RULE);
      }
      if (obj === "console" && !printAllowed(file)) add(node, `console.${prop}`, PRINT_RULE);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

if (import.meta.main) {
  const files = [...productFiles(ROOT, ["cli", "lib"]), "main.ts", "mod.ts"];
  const found = files.flatMap((f) => violations(f, Deno.readTextFileSync(`${ROOT}/${f}`)));
  for (const v of found) console.error(`${v.file}:${v.line}: ${v.what}; ${v.rule}`);
  if (found.length) {
    console.error(`boundaries: ${found.length} crossing(s)`);
    Deno.exit(1);
  }
  console.log(`boundaries: none crossed (${files.length} modules)`);
}
