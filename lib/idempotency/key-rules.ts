import { InvalidKeyError } from "./errors";

export const MAX_KEY_LENGTH = 255;
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;
export const FALLBACK_PREFIX = "fallback:";
/** Keys of pass-through calls in the audit log (reads it records): one per call, never a caller's. */
export const PASS_THROUGH_PREFIX = "passthrough:";

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
  for (const prefix of [FALLBACK_PREFIX, PASS_THROUGH_PREFIX]) {
    if (key.startsWith(prefix)) throw new InvalidKeyError(`the prefix "${prefix}" is reserved`);
  }
  return key;
}

/** The key a keyless call gets when its tool opted into fallback dedupe. */
export function fallbackKey(fingerprintHex: string): string {
  return FALLBACK_PREFIX + fingerprintHex;
}

/**
 * The audit log's key for a pass-through call (a read it records, see Engine): the call's own, so
 * it never meets a caller's key, a key-store record or another call.
 */
export function passThroughKey(executionId: string): string {
  return PASS_THROUGH_PREFIX + executionId;
}

export function isPassThroughKey(key: string): boolean {
  return key.startsWith(PASS_THROUGH_PREFIX);
}

export const SCOPE_PATTERN = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/;

export function isValidScope(scope: string): boolean {
  return SCOPE_PATTERN.test(scope);
}
