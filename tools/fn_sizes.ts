/**
 * The largest functions of the product code (lib/ and cli/, unit tests left out), by lines from the
 * first line of the declaration to its closing brace: a metric for "long functions as steps", printed
 * as a before/after number. Every function counts on its own, nested ones too (an outer function's
 * lines include its inner ones): declarations, methods, constructors, accessors, function expressions
 * and arrow functions with a block body. Run: `deno task fn-sizes [N]` (default 15).
 *
 * Uses the TypeScript parser (npm:typescript) rather than a hand-written scanner: telling a brace from
 * one inside a string, template or regular expression is the parser's job. Tool only: the product
 * never imports it.
 * @module
 */
import ts from "typescript";
import { productFiles, ROOT } from "./ts_files.ts";

/** One function and its size. */
export interface FnSize {
  /** Path relative to the project root. */
  file: string;
  /** 1-based line of the declaration. */
  line: number;
  /** Lines from the declaration to its closing brace. */
  lines: number;
  /** `Class.method`, `name`, or `<anonymous>` with the enclosing function's name where there is one. */
  name: string;
}

function nameOf(node: ts.Node, sf: ts.SourceFile): string | null {
  const n = (node as { name?: ts.Node }).name;
  if (n) {
    const own = n.getText(sf);
    const cls = node.parent && (ts.isClassLike(node.parent) ? node.parent.name?.getText(sf) : null);
    if (ts.isGetAccessorDeclaration(node)) return `${cls ? cls + "." : ""}get ${own}`;
    if (ts.isSetAccessorDeclaration(node)) return `${cls ? cls + "." : ""}set ${own}`;
    return cls ? `${cls}.${own}` : own;
  }
  if (ts.isConstructorDeclaration(node)) {
    const cls = ts.isClassLike(node.parent) ? node.parent.name?.getText(sf) : null;
    return `${cls ?? "<class>"}.constructor`;
  }
  const p = node.parent;
  if (p && (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p))) {
    return p.name.getText(sf);
  }
  return null;
}

function isFunction(node: ts.Node): node is ts.FunctionLikeDeclaration {
  return ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) || ts.isSetAccessorDeclaration(node) || ts.isFunctionExpression(node) ||
    (ts.isArrowFunction(node) && ts.isBlock(node.body));
}

/** The functions of one source text, each with its size. */
export function functionSizes(file: string, text: string): FnSize[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: FnSize[] = [];
  const visit = (node: ts.Node, outer: string | null): void => {
    let here = outer;
    if (isFunction(node) && node.body) {
      const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      const own = nameOf(node, sf);
      const name = own ?? (outer ? `<anonymous in ${outer}>` : "<anonymous>");
      out.push({ file, line: start + 1, lines: end - start + 1, name });
      here = own ?? outer;
    }
    ts.forEachChild(node, (c) => visit(c, here));
  };
  visit(sf, null);
  return out;
}

/** The `n` largest of `all`, largest first (ties by file and line). */
export function largest(all: FnSize[], n: number): FnSize[] {
  return [...all].sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line)
    .slice(0, n);
}

if (import.meta.main) {
  const n = Number(Deno.args[0] ?? 15);
  if (!Number.isInteger(n) || n < 1) {
    console.error(
      `fn-sizes: N: '${Deno.args[0]}' is not a positive whole number; e.g. deno task fn-sizes 15`,
    );
    Deno.exit(2);
  }
  const files = productFiles(ROOT, ["lib", "cli"]);
  const all = files.flatMap((f) => functionSizes(f, Deno.readTextFileSync(`${ROOT}/${f}`)));
  const top = largest(all, n);
  for (const f of top) console.log(`${String(f.lines).padStart(5)}  ${f.file}:${f.line}  ${f.name}`);
  console.log(`(${top.length} largest of ${all.length} functions in ${files.length} files of lib/ and cli/)`);
}
