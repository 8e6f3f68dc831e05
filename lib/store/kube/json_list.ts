/**
 * Reads a Kubernetes list response (`{"kind":…,"metadata":{…},"items":[…]}`) as a stream: each element of
 * the top-level `items` array is cut out of the text and parsed on its own, handed to the caller and dropped,
 * so a list of 5000 Nodes (51 MiB in one response from the watch cache) never exists as one string or one
 * object tree. Everything else of the top-level object (kind, metadata with resourceVersion and continue) is
 * kept as a small skeleton (each item replaced by `0`) and parsed at the end.
 *
 * Bounded whatever the server sends: the body at `maxBodyBytes`, one item and the skeleton at
 * `maxItemBytes`, the number of items at `maxItems`; breaking one cancels the body and throws
 * {@link ResponseTooLargeError}. Malformed JSON throws a StoreError.
 * @module
 */
import { isObj } from "../../base/json.ts";
import { StoreError } from "../errors.ts";
import { type CapKind, ResponseTooLargeError } from "../limits.ts";
import { JSON_LINES_CHUNK } from "../util.ts";

/** The caps of one list read. */
export interface JsonListCaps {
  maxBodyBytes: number;
  maxItemBytes: number;
  maxItems: number;
  /** Names the response in errors. */
  what: string;
}

const OPEN_OBJ = 0x7b, CLOSE_OBJ = 0x7d, OPEN_ARR = 0x5b, CLOSE_ARR = 0x5d;
const QUOTE = 0x22, BSLASH = 0x5c, COMMA = 0x2c;
/** What follows an item of an apiserver's list when another comes (see the fast path). */
const ITEM_MARK = '},{"metadata":';
const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** The incremental scanner (exported for tests). */
export class JsonListScanner {
  #caps: JsonListCaps;
  #onItem: (item: unknown) => void;
  #depth = 0;
  #inStr = false;
  #esc = false;
  /** A string at depth 1 (a key or a value of the top object): its first characters. */
  #str1: string | null = null;
  #lastStr1 = "";
  #inItems = false;
  /** 0: no item; 1: an object or array item; 2: a primitive item; 3: a string item. */
  #item = 0;
  #itemParts: string[] = [];
  #itemLen = 0;
  #skel: string[] = [];
  #skelLen = 0;
  #items = 0;
  #done = false;
  #sawTop = false;

  constructor(caps: JsonListCaps, onItem: (item: unknown) => void) {
    this.#caps = caps;
    this.#onItem = onItem;
  }

  /** Items seen so far. */
  get items(): number {
    return this.#items;
  }

  #tooLarge(what: string, cap: CapKind): never {
    throw new ResponseTooLargeError(`${this.#caps.what}: ${what}`, cap);
  }

  #bad(what: string): never {
    throw new StoreError(`${this.#caps.what}: the response is not a JSON list: ${what}`);
  }

  #addSkel(s: string): void {
    if (!s) return;
    this.#skelLen += s.length;
    if (this.#skelLen > this.#caps.maxItemBytes + 2 * this.#items + 2) {
      this.#tooLarge(`its fields outside items are larger than ${this.#caps.maxItemBytes} bytes`, "event");
    }
    this.#skel.push(s);
  }

  #itemTooLarge(): never {
    this.#tooLarge(
      `an item is larger than ${this.#caps.maxItemBytes} bytes (FLANCTL_API_MAX_EVENT_BYTES)`,
      "event",
    );
  }

  #addItemPart(s: string): void {
    this.#itemLen += s.length;
    if (this.#itemLen > this.#caps.maxItemBytes) this.#itemTooLarge();
    this.#itemParts.push(s);
  }

  #endItem(): void {
    const text = this.#itemParts.join("");
    this.#itemParts = [];
    this.#itemLen = 0;
    this.#item = 0;
    if (++this.#items > this.#caps.maxItems) {
      this.#tooLarge(`more than ${this.#caps.maxItems} items (FLANCTL_API_MAX_ITEMS)`, "items");
    }
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      this.#bad(`item ${this.#items} does not parse`);
    }
    this.#onItem(v);
  }

  /** Scans one decoded chunk. */
  push(s: string): void {
    // Positions into `s`, never its remainder as a new string: a chunk holding many items is not copied
    // once per item.
    for (let at = 0; at < s.length;) at = this.#fast ? this.#fastPush(s, at) : this.#charPush(s, at);
  }

  // The fast path. An apiserver writes each item of a list as `{"metadata":…}` (Go's encoding/json, fields
  // in declaration order), so an item ends where `},{"metadata":` follows: found with indexOf (native; the
  // character scan below runs in V8's interpreter when the daemon runs --jitless, as installed, several
  // times slower than JSON.parse: docs/performance.md). A candidate is taken only when JSON.parse accepts
  // it — an object's end is unique, so a parse that succeeds ends at the item's own closing brace — after 3
  // candidates that do not parse, past the item cap, or at the end of the list, the character scan takes
  // over for the rest of the list.
  #fast = false;
  /** The item's text from earlier chunks (fast mode). */
  #fastParts: string[] = [];
  #fastLen = 0;
  /** The last characters of that text, to find a marker split between two chunks. */
  #fastTail = "";
  #fastFails = 0;

  /** Tries `text` as the whole item; true (and the item handed over) when it parses. */
  #tryItem(text: string): boolean {
    // The item runs at least to this candidate's end: past the cap, it is too large whether or not it parses
    // (#fastPush checks the cap itself only after a chunk that holds no marker).
    if (text.length > this.#caps.maxItemBytes) this.#itemTooLarge();
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      this.#fastFails++;
      return false;
    }
    this.#fast = false;
    this.#fastParts = [];
    this.#fastLen = 0;
    this.#fastTail = "";
    this.#addSkel("0");
    if (++this.#items > this.#caps.maxItems) {
      this.#tooLarge(`more than ${this.#caps.maxItems} items (FLANCTL_API_MAX_ITEMS)`, "items");
    }
    this.#onItem(v);
    return true;
  }

  /** Feeds `s` from `at` to the item in fast mode; returns where scanning goes on in `s`. */
  #fastPush(s: string, at: number): number {
    const M = ITEM_MARK.length;
    // A marker split between the earlier text and this chunk.
    if (this.#fastTail) {
      const bridge = this.#fastTail + s.slice(at, at + M - 1);
      const k = bridge.indexOf(ITEM_MARK);
      if (k >= 0 && k < this.#fastTail.length) {
        const old = this.#fastParts.join("");
        const end = old.length - this.#fastTail.length + k + 1;
        if (this.#tryItem(old.slice(0, end))) {
          this.push(old.slice(end)); // a few characters: `,{"meta…`
          return at;
        }
      }
    }
    for (let from = at;;) {
      const k = s.indexOf(ITEM_MARK, from);
      if (k < 0) break;
      const head = this.#fastParts.length ? this.#fastParts.join("") : "";
      if (this.#tryItem(head + s.slice(at, k + 1))) return k + 1;
      if (this.#fastFails > 3) return this.#slowItem(at);
      from = k + 1;
    }
    const rest = s.length - at;
    this.#fastParts.push(at ? s.slice(at) : s);
    this.#fastLen += rest;
    this.#fastTail = rest >= M - 1
      ? s.slice(s.length - (M - 1))
      : (this.#fastTail + s.slice(at)).slice(-(M - 1));
    // No end found within an item's cap: the character scan decides (and enforces the cap).
    if (this.#fastLen > this.#caps.maxItemBytes) return this.#slowItem(s.length);
    return s.length;
  }

  /**
   * Leaves fast mode for good (this list does not look like an apiserver's): the item's text from earlier
   * chunks is scanned character by character; returns `at`, where the scan goes on in the current chunk.
   */
  #slowItem(at: number): number {
    const old = this.#fastParts.join("");
    this.#fast = false;
    this.#noFast = true;
    this.#fastParts = [];
    this.#fastLen = 0;
    this.#fastTail = "";
    for (let i = 0; i < old.length;) i = this.#charPush(old, i);
    return at;
  }

  #noFast = false;

  /**
   * The character scan from `at`. Most of a list is inside strings: there it jumps from quote to quote with
   * indexOf; outside strings it looks at each character. Returns where an item starts that the fast path
   * takes, else the end of `s`.
   */
  #charPush(s: string, at: number): number {
    let from = at; // start of the part of `s` not yet given to the skeleton or an item
    const n = s.length;
    let i = at;
    while (i < n) {
      if (this.#inStr) {
        if (this.#esc) {
          this.#esc = false;
          i++;
          continue;
        }
        // The closing quote: the next one not escaped by an odd run of backslashes (from i on: i itself
        // is never escaped, that case is #esc above).
        let j = s.indexOf('"', i);
        while (j !== -1) {
          let k = j - 1;
          while (k >= i && s.charCodeAt(k) === BSLASH) k--;
          if ((j - 1 - k) % 2 === 0) break;
          j = s.indexOf('"', j + 1);
        }
        const end = j === -1 ? n : j;
        if (this.#str1 !== null && this.#str1.length < 16) {
          this.#str1 += s.slice(i, Math.min(end, i + 16 - this.#str1.length));
        }
        if (j === -1) {
          let k = n - 1;
          while (k >= i && s.charCodeAt(k) === BSLASH) k--;
          this.#esc = (n - 1 - k) % 2 === 1; // the chunk ends inside an escape
          break;
        }
        i = j + 1;
        this.#inStr = false;
        if (this.#item === 3 && this.#depth === 2) {
          this.#addItemPart(s.slice(from, i));
          from = i;
          this.#endItem();
        } else if (this.#str1 !== null) {
          this.#lastStr1 = this.#str1;
          this.#str1 = null;
        }
        continue;
      }
      const c = s.charCodeAt(i);
      if (this.#done) {
        if (!isWs(c)) this.#bad("text after the top-level object");
        i++;
        continue;
      }
      if (this.#item === 2 && (isWs(c) || c === COMMA || c === CLOSE_ARR)) {
        this.#addItemPart(s.slice(from, i));
        from = i;
        this.#endItem();
      }
      const startsItem = this.#inItems && this.#depth === 2 && this.#item === 0 && !isWs(c) && c !== COMMA &&
        c !== CLOSE_ARR;
      if (startsItem && c === OPEN_OBJ && !this.#noFast) {
        this.#addSkel(s.slice(from, i));
        this.#fast = true;
        this.#fastTail = "";
        this.#fastFails = 0;
        return i;
      }
      if (startsItem) {
        this.#addSkel(s.slice(from, i) + "0");
        from = i;
        this.#item = c === OPEN_OBJ || c === OPEN_ARR ? 1 : c === QUOTE ? 3 : 2;
      }
      if (c === QUOTE) {
        this.#inStr = true;
        if (this.#depth === 1) this.#str1 = "";
      } else if (c === OPEN_OBJ || c === OPEN_ARR) {
        if (this.#depth === 0) {
          if (c !== OPEN_OBJ || this.#sawTop) this.#bad("it does not start with '{'");
          this.#sawTop = true;
        }
        this.#depth++;
        if (c === OPEN_ARR && this.#depth === 2 && this.#lastStr1 === "items") this.#inItems = true;
      } else if (c === CLOSE_OBJ || c === CLOSE_ARR) {
        this.#depth--;
        if (this.#depth < 0) this.#bad("unbalanced brackets");
        if (this.#item === 1 && this.#depth === 2) {
          this.#addItemPart(s.slice(from, i + 1));
          from = i + 1;
          this.#endItem();
        } else if (this.#inItems && this.#depth === 1) this.#inItems = false;
        if (this.#depth === 0) this.#done = true;
      } else if (this.#depth === 0 && !isWs(c)) this.#bad("it does not start with '{'");
      i++;
    }
    if (this.#item !== 0) {
      this.#addItemPart(s.slice(from));
    } else this.#addSkel(s.slice(from));
    return n;
  }

  /** The top-level object without its items (each one `0`), parsed. Throws if the list is incomplete. */
  finish(): Record<string, unknown> {
    // The list's last item (nothing follows it to mark its end) and whatever comes after it.
    if (this.#fast) this.#slowItem(0);
    this.#noFast = true;
    if (!this.#done || this.#inStr) this.#bad("it ends early");
    let top: unknown;
    try {
      top = JSON.parse(this.#skel.join(""));
    } catch {
      this.#bad("its fields do not parse");
    }
    if (!isObj(top)) this.#bad("not an object");
    return top;
  }
}

/**
 * Reads `body` as a list (see the module doc): calls `onItem` for each item as soon as it is parsed and
 * returns the top-level object's other fields. Cancels the body when it fails.
 */
export async function readJsonList(
  body: ReadableStream<Uint8Array>,
  caps: JsonListCaps,
  onItem: (item: unknown) => void,
): Promise<Record<string, unknown>> {
  const scanner = new JsonListScanner(caps, onItem);
  // A byte stream (fetch's bodies are) is read with a BYOB reader into one reused buffer, as jsonLines
  // does: the default reader has fetch allocate a fresh 64 KiB chunk for each read, ~950 of them for a
  // list of 5,000 Nodes, kept outside the JS heap until a GC finds them.
  let byob: ReadableStreamBYOBReader | null = null;
  try {
    byob = body.getReader({ mode: "byob" });
  } catch (e) {
    if (!(e instanceof TypeError)) throw e; // not a byte stream: the default reader below
  }
  const reader = byob ?? body.getReader();
  const dec = new TextDecoder();
  let bytes = 0;
  // A BYOB read hands the buffer over to the stream and back (a new ArrayBuffer object, same memory).
  let chunk = new Uint8Array(byob ? JSON_LINES_CHUNK : 0);
  try {
    for (;;) {
      let value: Uint8Array;
      if (byob) {
        const r = await byob.read(chunk);
        if (r.done) break;
        value = r.value;
        chunk = new Uint8Array(r.value.buffer);
      } else {
        const r = await (reader as ReadableStreamDefaultReader<Uint8Array>).read();
        if (r.done) break;
        value = r.value;
      }
      bytes += value.length;
      if (bytes > caps.maxBodyBytes) {
        throw new ResponseTooLargeError(
          `${caps.what}: the response is larger than ${caps.maxBodyBytes} bytes (refused; ` +
            `FLANCTL_API_MAX_BODY_BYTES raises the cap)`,
          "body",
        );
      }
      scanner.push(dec.decode(value, { stream: true }));
    }
    scanner.push(dec.decode());
    return scanner.finish();
  } finally {
    await reader.cancel().catch(() => {});
  }
}
