/**
 * libnftables through FFI: runs nft command text (one buffer = one kernel transaction) and returns its
 * output and error text as strings. Each call uses a fresh context with buffered output and error, so no
 * state (cache, flags) carries between calls. Loaded on first use; {@link nftLibrary} returns null when
 * `libnftables.so.1` (Debian `libnftables1`) is missing, so the caller can fall back to the `nft` binary.
 *
 * Hand-written rather than a package: no npm package binds libnftables for Deno, and the table below is
 * the whole binding. Pointers never leave this file: callers pass and receive strings.
 * @module
 */
import { libraryPath } from "./ffi.ts";

/** libnftables.so.1: the high-level nft API (include/nftables/libnftables.h). */
const NFT_SYMBOLS = {
  // struct nft_ctx *nft_ctx_new(uint32_t flags);
  nft_ctx_new: { parameters: ["u32"], result: "pointer" },
  // void nft_ctx_free(struct nft_ctx *ctx);
  nft_ctx_free: { parameters: ["pointer"], result: "void" },
  // int nft_ctx_buffer_output(struct nft_ctx *ctx);
  nft_ctx_buffer_output: { parameters: ["pointer"], result: "i32" },
  // int nft_ctx_buffer_error(struct nft_ctx *ctx);
  nft_ctx_buffer_error: { parameters: ["pointer"], result: "i32" },
  // const char *nft_ctx_get_output_buffer(struct nft_ctx *ctx);
  nft_ctx_get_output_buffer: { parameters: ["pointer"], result: "pointer" },
  // const char *nft_ctx_get_error_buffer(struct nft_ctx *ctx);
  nft_ctx_get_error_buffer: { parameters: ["pointer"], result: "pointer" },
  // unsigned int nft_ctx_output_get_flags(struct nft_ctx *ctx);
  nft_ctx_output_get_flags: { parameters: ["pointer"], result: "u32" },
  // void nft_ctx_output_set_flags(struct nft_ctx *ctx, unsigned int flags);
  nft_ctx_output_set_flags: { parameters: ["pointer", "u32"], result: "void" },
  // int nft_run_cmd_from_buffer(struct nft_ctx *nft, const char *buf);
  nft_run_cmd_from_buffer: { parameters: ["pointer", "buffer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** NFT_CTX_DEFAULT. */
const CTX_DEFAULT = 0;
/** NFT_CTX_OUTPUT_HANDLE: print rule handles. */
const OUTPUT_HANDLE = 1 << 3;
/** NFT_CTX_OUTPUT_JSON: JSON output. */
const OUTPUT_JSON = 1 << 4;

/** Output options of one run. */
export interface NftRunOptions {
  /** JSON output (`nft -j`). */
  json?: boolean;
  /** Print rule handles (`nft -a`). */
  handles?: boolean;
}

/** The result of one run: rc 0 = the whole buffer was committed (or listed). */
export interface NftRunResult {
  rc: number;
  output: string;
  error: string;
}

/** Runs nft command text with libnftables. */
export interface NftLibrary {
  run(text: string, opts?: NftRunOptions): NftRunResult;
}

type Lib = Deno.DynamicLibrary<typeof NFT_SYMBOLS>["symbols"];
let dl: Deno.DynamicLibrary<typeof NFT_SYMBOLS> | null = null;
/** Whether libnftables.so.1 loaded (undefined: not tried yet). */
let loads: boolean | undefined;

function cstr(p: Deno.PointerValue): string {
  return p === null ? "" : new Deno.UnsafePointerView(p).getCString();
}

/** The symbols, loading the library (again, after {@link releaseNftLibrary}) when needed; null when missing. */
function symbols(): Lib | null {
  if (dl) return dl.symbols;
  if (loads === false) return null;
  try {
    dl = Deno.dlopen(libraryPath("libnftables.so.1"), NFT_SYMBOLS);
    loads = true;
    return dl.symbols;
  } catch {
    loads = false;
    return null;
  }
}

/**
 * Unloads libnftables (dlclose) until the next run loads it again. The daemon in iptables mode needs it once
 * at start (removing nftables mode's tables): mapped for good, it and its libraries (libnftnl, libmnl,
 * libgmp, libjansson, libxtables) stayed in the daemon's RSS for its whole life (docs/performance.md,
 * "Smaller figures").
 */
export function releaseNftLibrary(): void {
  dl?.close();
  dl = null;
}

/** libnftables, or null when `libnftables.so.1` cannot be loaded. Loaded on first use. */
export function nftLibrary(): NftLibrary | null {
  if (symbols() === null) return null;
  return {
    run(text, opts = {}) {
      const s = symbols();
      if (s === null) return { rc: -1, output: "", error: "libnftables.so.1 could not be loaded again" };
      const ctx = s.nft_ctx_new(CTX_DEFAULT);
      if (ctx === null) return { rc: -1, output: "", error: "nft_ctx_new failed (out of memory)" };
      try {
        s.nft_ctx_buffer_output(ctx);
        s.nft_ctx_buffer_error(ctx);
        let flags = s.nft_ctx_output_get_flags(ctx);
        if (opts.json) flags |= OUTPUT_JSON;
        if (opts.handles) flags |= OUTPUT_HANDLE;
        s.nft_ctx_output_set_flags(ctx, flags);
        const rc = s.nft_run_cmd_from_buffer(ctx, new TextEncoder().encode(text + "\0"));
        return {
          rc,
          output: cstr(s.nft_ctx_get_output_buffer(ctx)),
          error: cstr(s.nft_ctx_get_error_buffer(ctx)),
        };
      } finally {
        s.nft_ctx_free(ctx);
      }
    },
  };
}
