/**
 * Properties of the streaming list scanner (json_list.ts), what an API server's list body reaches: however
 * the body is cut into chunks, a list gives the items and fields JSON.parse gives; edited or junk bodies,
 * and bodies over a cap, end in a StoreError (ResponseTooLargeError for a cap), never another throw, and
 * whatever is accepted is what JSON.parse reads in the same text. Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../../tests/assert.ts";
import { check, checkAsync, longText, mutated, outcome } from "../../../tests/prop.ts";
import { StoreError } from "../errors.ts";
import { ResponseTooLargeError } from "../limits.ts";
import { type JsonListCaps, JsonListScanner, readJsonList } from "./json_list.ts";

const BIG: JsonListCaps = { maxBodyBytes: 1e9, maxItemBytes: 1e6, maxItems: 1e6, what: "prop list" };
const isStoreError = (e: unknown) => e instanceof StoreError;

/** Strings that matter to the scanner: quotes, escapes, brackets, the fast path's item marker. */
const tricky = fc.constantFrom(
  '"',
  "\\",
  '\\"',
  "items",
  "]",
  "}",
  "{[",
  '},{"metadata":',
  "é€😀",
  "a\nb",
  "\u2028",
  "",
);
const str = fc.oneof(fc.string({ maxLength: 8 }), tricky, fc.tuple(tricky, tricky).map(([a, b]) => a + b));

/** JSON values with the tricky strings as keys and values. */
const value: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    str,
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("v"), { maxLength: 3 }),
    fc.dictionary(str, tie("v"), { maxKeys: 3 }),
  ),
})).v;

/** An item as an API server writes it (`{"metadata":…}` first, nested `metadata` lists too), or any value. */
const item = fc.oneof(
  fc.record({
    metadata: value,
    spec: fc.array(fc.record({ metadata: value }), { maxLength: 2 }),
    status: value,
  }),
  value,
);

/** A list body: `items` anywhere among the other fields, compact (as Go) or indented. */
const listBody = fc.record({
  items: fc.array(item, { maxLength: 6 }),
  rv: fc.nat().map(String),
  cont: fc.option(str),
  extra: fc.dictionary(str.filter((k) => k !== "items"), value, { maxKeys: 2 }),
  itemsFirst: fc.boolean(),
  indent: fc.constantFrom(0, 0, 1, 2),
}).map(({ items, rv, cont, extra, itemsFirst, indent }) => {
  const metadata = cont === null ? { resourceVersion: rv } : { resourceVersion: rv, continue: cont };
  const head = { kind: "NodeList", apiVersion: "v1", metadata, ...extra };
  const list = itemsFirst ? { items, ...head } : { ...head, items };
  return JSON.stringify(list, null, indent);
});

/** Where a body is cut into chunks: one piece, every character, or random places. */
const cuts: fc.Arbitrary<readonly number[]> = fc.oneof(
  fc.constant([] as number[]),
  fc.constant([1]),
  fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 12 }),
);

/** Feeds `text` in the chunks `sizes` says (cycled); returns the items and the top-level fields. */
function scan(
  text: string,
  sizes: readonly number[],
  caps = BIG,
): { items: unknown[]; top: Record<string, unknown> } {
  const items: unknown[] = [];
  const s = new JsonListScanner(caps, (x) => items.push(x));
  for (let i = 0, k = 0; i < text.length; k++) {
    const n = sizes.length ? sizes[k % sizes.length] : text.length;
    s.push(text.slice(i, i + n));
    i += n;
  }
  return { items, top: s.finish() };
}

/** What JSON.parse gives for the same text, in the scanner's terms (items handed out, each replaced by 0). */
function expected(text: string): { items: unknown[]; top: unknown } {
  const doc = JSON.parse(text);
  if (!Array.isArray(doc.items)) return { items: [], top: doc };
  return { items: doc.items, top: { ...doc, items: doc.items.map(() => 0) } };
}

Deno.test("list scanner (property): any chunking of a list gives JSON.parse's items and fields", () => {
  check(
    fc.property(listBody, cuts, (text, sizes) => {
      const got = scan(text, sizes);
      const want = expected(text);
      assertEquals(JSON.stringify(got.items), JSON.stringify(want.items));
      assertEquals(got.top, want.top);
    }),
    400,
  );
});

Deno.test("list scanner (property): edited or junk bodies are a StoreError or exactly JSON.parse's reading", () => {
  const body = fc.oneof(
    mutated(listBody),
    mutated(listBody.map((t) => t.replace(/^\{/, '{"items":[{"metadata":1},'))),
    fc.json({ maxDepth: 3 }),
    fc.string({ unit: fc.constantFrom(...'{}[],:"\\ items0'), maxLength: 40 }),
    longText,
  );
  check(
    fc.property(body, cuts, (text, sizes) => {
      const r = outcome(() => scan(text, sizes), isStoreError);
      if (!r.ok) return;
      let want: { items: unknown[]; top: unknown };
      try {
        want = expected(text);
      } catch {
        throw new Error(`accepted a body JSON.parse refuses: ${JSON.stringify(text)}`);
      }
      assertEquals(JSON.stringify(r.value.items), JSON.stringify(want.items));
      assertEquals(r.value.top, want.top);
    }),
    1000,
  );
});

Deno.test("list scanner (property): caps are enforced, and a list within them reads as without them", () => {
  const caps = fc.record({
    maxBodyBytes: fc.constant(1e9),
    maxItemBytes: fc.integer({ min: 2, max: 300 }),
    maxItems: fc.integer({ min: 0, max: 6 }),
    what: fc.constant("capped list"),
  });
  check(
    fc.property(listBody, cuts, caps, (text, sizes, c) => {
      const r = outcome(() => scan(text, sizes, c), isStoreError);
      const want = expected(text);
      if (!r.ok) {
        // Refused: the only StoreError a valid list can meet is a broken cap.
        assert(r.error instanceof ResponseTooLargeError, r.error.message);
        return;
      }
      assert(r.value.items.length <= c.maxItems, `${r.value.items.length} items > ${c.maxItems}`);
      for (const x of r.value.items) {
        assert(JSON.stringify(x).length <= c.maxItemBytes, "an item over the cap was handed out");
      }
      assertEquals(JSON.stringify(r.value.items), JSON.stringify(want.items));
      assertEquals(r.value.top, want.top);
    }),
    500,
  );
});

Deno.test("list scanner (property): readJsonList reads a body cut at any byte (UTF-8 split) as JSON.parse", async () => {
  await checkAsync(
    fc.asyncProperty(
      listBody,
      fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 6 }),
      async (text, sizes) => {
        const bytes = new TextEncoder().encode(text);
        const chunks: Uint8Array[] = [];
        for (let i = 0, k = 0; i < bytes.length; k++) {
          const n = sizes[k % sizes.length];
          chunks.push(bytes.slice(i, i + n));
          i += n;
        }
        const stream = new ReadableStream<Uint8Array>({
          start(ctl) {
            for (const c of chunks) ctl.enqueue(c);
            ctl.close();
          },
        });
        const items: unknown[] = [];
        const top = await readJsonList(stream, BIG, (x) => items.push(x));
        const want = expected(text);
        assertEquals(JSON.stringify(items), JSON.stringify(want.items));
        assertEquals(top, want.top);
      },
    ),
    200,
  );
});
