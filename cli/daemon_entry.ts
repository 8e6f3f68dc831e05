/**
 * The installed daemon's entry point: install.sh bundles this file (with {@link daemonMain} and everything it
 * imports, the udp data-path worker excepted) into one `daemon.js`, and its launcher runs that for
 * `flanctl daemon …` and for the binary invoked as `flanneld`. One bundled file instead of main.ts's module
 * graph: no module resolution and no TypeScript at start-up, and less RSS for the daemon's lifetime
 * (measured: docs/performance.md, "Smaller figures"). Arguments are the daemon's own (no `daemon` verb).
 * @module
 */
import { daemonMain } from "./daemon_main.ts";

Deno.exit(await daemonMain(Deno.args));
