/**
 * Shared settings of the property tests (fast-check): how many cases, and a pinned seed to replay a failure.
 *
 * fast-check draws a fresh seed per run and, when a property fails, prints it with the shrunk counterexample
 * and its path (`seed: 1234, path: "5:2:0"`). `FLANCTL_PROP_SEED=1234` replays that run (every property of
 * the run gets the same seed); `FLANCTL_PROP_RUNS=<n>` multiplies every property's case count (a longer
 * fuzz locally, e.g. 20).
 * @module
 */
import fc from "fast-check";
import nodeAssert from "node:assert/strict";
import { IPAddr, IPNet } from "../lib/base/cidr.ts";

function env(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined; // no --allow-env: the defaults
  }
}

function intEnv(name: string): number | undefined {
  const v = env(name);
  if (v === undefined || v === "") return undefined;
  if (!/^-?\d+$/.test(v)) throw new Error(`${name}=${JSON.stringify(v)} is not an integer`);
  return Number(v);
}

/** fast-check's parameters for a property of `numRuns` cases (scaled by FLANCTL_PROP_RUNS), seeded if pinned. */
export function propParams<T>(numRuns: number): fc.Parameters<T> {
  const seed = intEnv("FLANCTL_PROP_SEED");
  const scale = intEnv("FLANCTL_PROP_RUNS") ?? 1;
  const p: fc.Parameters<T> = { numRuns: Math.max(1, numRuns * scale) };
  if (seed !== undefined) p.seed = seed;
  return p;
}

/** Runs `prop` with {@link propParams}: throws (with seed, path and counterexample) when it fails. */
export function check<T>(prop: fc.IPropertyWithHooks<T>, numRuns: number): void {
  fc.assert(prop, propParams<T>(numRuns));
}

/** The async form of {@link check}. */
export async function checkAsync<T>(prop: fc.IAsyncPropertyWithHooks<T>, numRuns: number): Promise<void> {
  await fc.assert(prop, propParams<T>(numRuns));
}

/**
 * Runs `fn` and returns what it returned, or the error when it threw one `typed` accepts; any other error
 * (a TypeError, a RangeError, a plain Error) is re-thrown, so the property fails on it.
 */
export function outcome<R>(
  fn: () => R,
  typed: (e: unknown) => boolean,
): { ok: true; value: R } | { ok: false; error: Error } {
  try {
    return { ok: true, value: fn() };
  } catch (e) {
    if (typed(e)) return { ok: false, error: e as Error };
    throw e;
  }
}

/** Text that mixes `valid` with arbitrary edits: characters inserted, deleted or replaced at random places. */
export function mutated(valid: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const edit = fc.tuple(
    fc.nat(),
    fc.nat(3),
    fc.oneof(
      fc.string({ maxLength: 4 }),
      fc.constantFrom(
        "{",
        "}",
        "[",
        "]",
        '"',
        ",",
        ":",
        "\\",
        "\n",
        "=",
        "/",
        ".",
        "\u0000",
        "\u00e9",
        "\ud83d\ude00",
      ),
    ),
  );
  return fc.tuple(valid, fc.array(edit, { minLength: 1, maxLength: 4 })).map(([s, edits]) => {
    let out = s;
    for (const [at, del, ins] of edits) {
      const i = out.length ? at % (out.length + 1) : 0;
      out = out.slice(0, i) + ins + out.slice(i + del);
    }
    return out;
  });
}

/** Bytes with the same kind of edits as {@link mutated}: bytes overwritten, inserted or cut off. */
export function mutatedBytes(valid: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  const edit = fc.tuple(
    fc.constantFrom("set", "insert", "truncate"),
    fc.nat(),
    fc.integer({ min: 0, max: 255 }),
  );
  return fc.tuple(valid, fc.array(edit, { minLength: 1, maxLength: 6 })).map(([b, edits]) => {
    let out = Array.from(b);
    for (const [kind, at, v] of edits) {
      const i = out.length ? at % out.length : 0;
      if (kind === "set" && out.length) out[i] = v;
      else if (kind === "insert") out.splice(i, 0, v);
      else out = out.slice(0, i);
    }
    return new Uint8Array(out);
  });
}

/** IPv4 addresses, biased to the private ranges flannel networks use and to the edges (0, broadcast). */
export const ipv4Addr: fc.Arbitrary<IPAddr> = fc.oneof(
  fc.integer({ min: 0, max: 0xffffffff }),
  fc.tuple(fc.constantFrom(10, 172, 192), fc.integer({ min: 0, max: 0xffffff })).map(([a, r]) =>
    a * 0x1000000 + r
  ),
  fc.constantFrom(0, 0xffffffff, 0x0a000000, 0x7f000001),
).map((v) => new IPAddr(4, BigInt(v)));

/** IPv6 addresses: any 128 bits, or few non-zero groups (so `::` forms come up), or fc00::/8 ones. */
export const ipv6Addr: fc.Arbitrary<IPAddr> = fc.oneof(
  fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
  fc.array(fc.tuple(fc.nat(7), fc.integer({ min: 0, max: 0xffff })), { maxLength: 3 }).map((gs) =>
    gs.reduce((v, [i, g]) => v | (BigInt(g) << BigInt(16 * i)), 0n)
  ),
  fc.bigInt({ min: 0n, max: (1n << 120n) - 1n }).map((v) => (0xfcn << 120n) | v),
).map((v) => new IPAddr(6, v));

/** IPv4 prefixes (address masked), every length. */
export const ipv4Net: fc.Arbitrary<IPNet> = fc.tuple(ipv4Addr, fc.integer({ min: 0, max: 32 })).map(
  ([a, p]) => new IPNet(a, p),
);

/** IPv6 prefixes (address masked), every length. */
export const ipv6Net: fc.Arbitrary<IPNet> = fc.tuple(ipv6Addr, fc.integer({ min: 0, max: 128 })).map(
  ([a, p]) => new IPNet(a, p),
);

/** Strings of any code points, lone surrogates and control characters included. */
export const anyText: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ maxLength: 40 }),
);

/** Long text (hundreds to thousands of characters): what a message quoting it must bound. */
export const longText: fc.Arbitrary<string> = fc.tuple(
  anyText.filter((s) => s.length > 0),
  fc.integer({
    min: 200,
    max: 5000,
  }),
).map(([s, n]) => s.repeat(Math.ceil(n / s.length)).slice(0, n));

/**
 * A message quoting untrusted data is printed (the CLI's warnings go to the terminal as they are): bounded, and
 * no control character of the data gets through raw.
 */
export function assertQuotable(msg: string): void {
  // deno-lint-ignore no-control-regex
  nodeAssert.ok(!/[\u0000-\u001f\u007f-\u009f]/.test(msg), `control characters in ${JSON.stringify(msg)}`);
  nodeAssert.ok(msg.length <= 400, `${msg.length} characters: ${JSON.stringify(msg.slice(0, 200))}…`);
}
