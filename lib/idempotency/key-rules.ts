import { InvalidKeyError } from "./errors";

export const MAX_KEY_LENGTH = 255;
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;
export const FALLBACK_PREFIX = "fallback:";

/**
 * Keys are 1–255 printable ASCII characters; anything else is refused, never normalized. "." and
 * ".." are refused too: as a URL path segment (the console's /keys/{scope}/{key}, the API's
 * /api/v1/keys/{scope}/{key}) they mean "this" and "parent" even when percent-encoded, so such a
 * key could not be addressed.
 */
export function validateKey(key: string): string {
  if (key.length === 0) throw new InvalidKeyError("it is empty");
  if (key === "." || key === "..") throw new InvalidKeyError(`"${key}" is not allowed: it cannot be a URL path segment`);
  if (key.length > MAX_KEY_LENGTH) throw new InvalidKeyError(`it is longer than ${MAX_KEY_LENGTH} characters`);
  if (!PRINTABLE_ASCII.test(key)) throw new InvalidKeyError("it may hold printable ASCII characters only");
  if (key.startsWith(FALLBACK_PREFIX)) throw new InvalidKeyError(`the prefix "${FALLBACK_PREFIX}" is reserved`);
  return key;
}

/** The key a keyless call gets when its tool opted into fallback dedupe. */
export function fallbackKey(fingerprintHex: string): string {
  return FALLBACK_PREFIX + fingerprintHex;
}

export const SCOPE_PATTERN = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/;

export function isValidScope(scope: string): boolean {
  return SCOPE_PATTERN.test(scope);
}
