/**
 * Test literals as the branded address types, unchecked: fixtures read better with literals, and the
 * refusal tests hand the encoder bad values on purpose. Code outside tests makes these only with the
 * parse functions of lib/base/cidr.ts.
 * @module
 */
import type { Cidr, Ip, Mac } from "../lib/base/cidr.ts";

/** `s` as an {@link Ip}, unchecked. */
export const asIp = (s: string): Ip => s as Ip;
/** `s` as a {@link Cidr}, unchecked. */
export const asCidr = (s: string): Cidr => s as Cidr;
/** `s` as a {@link Mac}, unchecked. */
export const asMac = (s: string): Mac => s as Mac;
