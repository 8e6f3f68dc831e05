/**
 * The import-cycle gate of `deno task ok`: builds the module graph of every TypeScript file of the
 * project from `deno info --json` and fails (exit 1) on any cycle, printing each one as a path.
 *
 * Layers point down only; a cycle (static, dynamic or type-only import) means two modules that
 * cannot be read, tested or moved apart. Checked twice: between modules, and between layers (a lib/
 * directory, cli/, tests/…). Also fails when product code (main.ts, mod.ts, cli/, lib/ outside unit tests)
 * imports test-only code (tests/). Run: `deno task cycles`.
 * @module
 */
import { runProcess } from "../lib/base/run.ts";

const ROOT_DIRS = ["cli", "lib", "tests", "bench", "tools"];
const ROOT_FILES = ["main.ts", "mod.ts"];

/** One module of the graph and the project modules it imports. */
export type Graph = Map<string, string[]>;

/** Every .ts file below the project's source directories, as file URLs. */
async function projectFiles(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    let entries: Deno.DirEntry[];
    try {
      entries = [...Deno.readDirSync(dir)];
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return;
      throw err;
    }
    for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory) await walk(path);
      else if (e.isFile && e.name.endsWith(".ts")) out.push(new URL(`file://${path}`).href);
    }
  };
  for (const d of ROOT_DIRS) await walk(`${root}/${d}`);
  for (const f of ROOT_FILES) {
    try {
      if (Deno.statSync(`${root}/${f}`).isFile) out.push(new URL(`file://${root}/${f}`).href);
    } catch { /* absent */ }
  }
  return out;
}

interface InfoModule {
  specifier: string;
  dependencies?: { code?: { specifier: string }; type?: { specifier: string } }[];
}

/** The project-local import graph of `files`, from one `deno info --json` over a synthetic root. */
export async function moduleGraph(root: string, files: string[]): Promise<Graph> {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-cycles-" });
  try {
    const entry = `${dir}/all.ts`;
    await Deno.writeTextFile(entry, files.map((f) => `import ${JSON.stringify(f)};\n`).join(""));
    const res = await runProcess([Deno.execPath(), "info", "--json", entry], {
      cwd: root,
      env: { NO_COLOR: "1" },
    });
    if (res.code !== 0) throw new Error(`deno info failed: ${res.stderr}`);
    const info = JSON.parse(res.stdout) as { modules: InfoModule[] };
    const prefix = new URL(`file://${root}/`).href;
    const graph: Graph = new Map();
    for (const m of info.modules) {
      if (!m.specifier.startsWith(prefix)) continue;
      const deps = new Set<string>();
      for (const d of m.dependencies ?? []) {
        for (const s of [d.code?.specifier, d.type?.specifier]) {
          if (s?.startsWith(prefix)) deps.add(s.slice(prefix.length));
        }
      }
      graph.set(m.specifier.slice(prefix.length), [...deps].sort());
    }
    return graph;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The strongly connected components of more than one module (or a module importing itself). */
export function cycles(graph: Graph): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, idx.get(w)!));
      }
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!idx.has(v)) visit(v);
  return out;
}

/**
 * The layer of a module: a directory of lib/ (`lib/store`), a top-level lib module on its own
 * (`lib/base/errors.ts`), `tests` for every test file, else the top directory (`cli`, `tests`, `bench`, `tools`) or the root file.
 */
export function layerOf(path: string): string {
  if (path.endsWith("_test.ts")) return "tests"; // unit tests beside their module are consumers, not layer
  const parts = path.split("/");
  if (parts[0] === "lib") return parts.length > 2 ? `lib/${parts[1]}` : path;
  return parts.length > 1 ? parts[0] : path;
}

/** The graph of layers: an edge A → B when a module of A imports one of B (A ≠ B). */
export function layerGraph(graph: Graph): Graph {
  const layers = new Map<string, Set<string>>();
  for (const [m, deps] of graph) {
    const a = layerOf(m);
    const set = layers.get(a) ?? new Set<string>();
    layers.set(a, set);
    for (const d of deps) if (layerOf(d) !== a) set.add(layerOf(d));
  }
  return new Map([...layers].map(([k, v]) => [k, [...v].sort()]));
}

/** Layers that only the tests, benches and tools may import: test-only code never ships in the product. */
const TEST_ONLY_LAYERS = new Set(["tests"]);
/** Layers allowed to import test-only code. */
const TEST_CONSUMERS = new Set(["tests", "bench", "tools"]);

/** Imports from product code (main.ts, mod.ts, cli/, lib/) into test-only code, as `from -> to` lines. */
export function testOnlyImports(graph: Graph): string[] {
  const out: string[] = [];
  for (const [m, deps] of graph) {
    if (TEST_CONSUMERS.has(layerOf(m))) continue;
    for (const d of deps) if (TEST_ONLY_LAYERS.has(layerOf(d))) out.push(`${m} -> ${d}`);
  }
  return out.sort();
}

/** Which module of layer `a` imports which of layer `b`, for the message. */
function edgesBetween(graph: Graph, a: string, b: string): string[] {
  const out: string[] = [];
  for (const [m, deps] of graph) {
    if (layerOf(m) !== a) continue;
    for (const d of deps) if (layerOf(d) === b) out.push(`${m} -> ${d}`);
  }
  return out;
}

/** One shortest import path from `from` back to itself inside `scc`, for the message. */
export function loopIn(graph: Graph, scc: string[]): string[] {
  const inScc = new Set(scc);
  const start = scc[0];
  const prev = new Map<string, string>();
  const queue = [start];
  const seen = new Set<string>();
  while (queue.length) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!inScc.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let x: string | undefined = v; x !== undefined && x !== start; x = prev.get(x)) path.unshift(x);
        path.unshift(start);
        return path;
      }
      if (!seen.has(w)) {
        seen.add(w);
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return scc;
}

if (import.meta.main) {
  const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
  const graph = await moduleGraph(root, await projectFiles(root));
  const layers = layerGraph(graph);
  const moduleCycles = cycles(graph);
  const layerCycles = cycles(layers);
  for (const scc of moduleCycles) {
    console.error(`module cycle: ${loopIn(graph, scc).join(" -> ")}`);
    if (scc.length > 2) console.error(`  all in it: ${scc.join(", ")}`);
  }
  for (const scc of layerCycles) {
    const loop = loopIn(layers, scc);
    console.error(`layer cycle: ${loop.join(" -> ")}`);
    if (scc.length > 2) console.error(`  all in it: ${scc.join(", ")}`);
    for (let i = 0; i + 1 < loop.length; i++) {
      for (const e of edgesBetween(graph, loop[i], loop[i + 1])) console.error(`  ${e}`);
    }
  }
  const testOnly = testOnlyImports(graph);
  for (const e of testOnly) console.error(`product code imports test-only code: ${e}`);
  const n = moduleCycles.length + layerCycles.length + testOnly.length;
  if (n > 0) {
    console.error(
      `cycles: ${moduleCycles.length} module and ${layerCycles.length} layer cycle(s), ` +
        `${testOnly.length} import(s) of test-only code`,
    );
    Deno.exit(1);
  }
  console.log(`cycles: none (${graph.size} modules, ${layers.size} layers)`);
}
