/** flanctl's version (keep in step with deno.json). */
export const VERSION = "0.1.0";
