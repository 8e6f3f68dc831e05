/**
 * The shape test every parser of untrusted JSON starts with (CNI stdin, net-conf.json, lease values, API
 * bodies, state files).
 * @module
 */

/** A JSON object, as `JSON.parse` gives for `{…}`: not null, not an array. */
export function isObj(x: unknown): x is Record<string, unknown> {
  return x !== null && typeof x === "object" && !Array.isArray(x);
}
