import { createHash } from "node:crypto";
import canonicalize from "canonicalize";

/** RFC 8785 canonical JSON of a value; refuses what JSON cannot carry (undefined, functions, NaN). */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError("arguments are not representable as JSON");
  return text;
}

/** SHA-256 (hex) of the tool name and the canonical JSON of its arguments. */
export function fingerprint(tool: string, args: unknown): string {
  return createHash("sha256").update(tool).update("\n").update(canonicalJson(args ?? null)).digest("hex");
}
