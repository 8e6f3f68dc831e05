/**
 * `deno task bench`: runs every `bench/*_bench.ts` (or the ones named on the command line) in its own
 * process, one after another, so each measures on a quiet machine. Each bench prints its own table with
 * ratios against the reference measured in the same run.
 * @module
 */
const dir = new URL(".", import.meta.url).pathname;
const only = Deno.args;
const files = [...Deno.readDirSync(dir)]
  .map((e) => e.name)
  .filter((n) => n.endsWith("_bench.ts") && (only.length === 0 || only.some((o) => n.includes(o))))
  .sort();
let failed = 0;
for (const f of files) {
  console.log(`\n=== ${f} ===`);
  const r = await new Deno.Command(Deno.execPath(), { args: ["run", "-A", "--no-check", `${dir}${f}`] })
    .spawn()
    .status;
  if (!r.success) {
    console.log(`${f}: FAILED (exit ${r.code})`);
    failed++;
  }
}
Deno.exit(failed ? 1 : 0);
