/**
 * The boundary gate of `deno task gate` (`deno task boundaries`): fails (exit 1) when product code
 * (main.ts, mod.ts, cli/, lib/; unit tests left out) crosses one of the project's two code boundaries,
 * printing each place as `file:line: what; rule`:
 *
 * - FFI stays in the kernel layer: `Deno.dlopen` and the `Deno.Unsafe*` pointer APIs only in lib/netlink
 *   (one symbol table per library, lib/netlink/ffi.ts; pointers never leave that directory), and the rest
 *   of the product reaches lib/netlink through its public faces only — mod.ts, and dataplane.ts for the
 *   udp data path — an `import type` of lib/netlink/types.ts (the layer's declared types, which mod.ts
 *   re-exports) aside; {@link NETLINK_INTERNAL_ALLOWED} would list exceptions (none now).
 * - Library code never prints: no `console.*`, `Deno.stdout` or `Deno.stderr` in lib/ outside the output
 *   layers: the daemon's Logger (lib/daemon/log.ts), the warning sinks of command-line callers
 *   (lib/warn.ts), the terminal renderers (lib/ui/) and the CNI executable's protocol I/O (lib/cni/skel.ts:
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
const FFI_RULE = "FFI only in lib/netlink (its mod.ts exports what others need, without pointers)";
const NETLINK_RULE = "lib/netlink is reached through its mod.ts (export what is needed there)";

/**
 * Modules still importing lib/netlink internals directly (an open item of issue 15, not a licence): the
 * udp backend's userspace data plane (tun, udp_socket, udp_dataplane, errors).
 */
export const NETLINK_INTERNAL_ALLOWED = new Set<string>([]);
/** The kernel layer's public faces: mod.ts, and dataplane.ts (the udp data path, kept off the CNI bundle). */
const NETLINK_FACES = ["lib/netlink/mod.ts", "lib/netlink/dataplane.ts"];
const PRINT_RULE = "library code never prints: take the Logger or a warn callback (lib/warn.ts)";

/** Modules of lib/ allowed to write to the terminal (see the module doc). */
const PRINT_LAYERS = ["lib/daemon/log.ts", "lib/warn.ts", "lib/ui/", "lib/cni/skel.ts"];

const ffiAllowed = (file: string) => file.startsWith("lib/netlink/");
const printAllowed = (file: string) =>
  !file.startsWith("lib/") || PRINT_LAYERS.some((p) => p.endsWith("/") ? file.startsWith(p) : file === p);

/** `spec` imported from `file` as a project path (`lib/netlink/tun.ts`), or null when it is not relative. */
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
      if (netlinkInternal(file, resolveImport(file, spec), typeOnly)) add(node, what, NETLINK_RULE);
    }
    if (
      ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments.length === 1 && ts.isStringLiteral(node.arguments[0])
    ) {
      const spec = node.arguments[0].text;
      if (netlinkInternal(file, resolveImport(file, spec), false)) add(node, `import(${spec})`, NETLINK_RULE);
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
