import { hash } from "node:crypto";
import canonicalize from "canonicalize";
import { InvalidArgumentsError } from "./errors";

/**
 * How deeply arrays and objects may nest in a tool's arguments (and in any JSON body the gateway
 * reads): `{}` is one level, `{"a":[1]}` two. Real arguments stay far below it; deeper values are
 * refused with a 400 before anything walks them recursively (the canonicalizer, JSON.stringify).
 */
export const MAX_JSON_DEPTH = 64;

/** Whether arrays and objects in `value` nest deeper than `max` levels; walks without recursion, a cycle counts as too deep. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== "object") continue;
    if (depth + 1 > max) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      if (child !== null && typeof child === "object") stack.push([child, depth + 1]);
    }
  }
  return false;
}

/**
 * RFC 8785 canonical JSON of a value; refuses what JSON cannot carry (undefined, functions, NaN)
 * and values nested deeper than MAX_JSON_DEPTH (InvalidArgumentsError, a 400).
 */
export function canonicalJson(value: unknown): string {
  if (nestsDeeperThan(value, MAX_JSON_DEPTH)) {
    throw new InvalidArgumentsError(`the arguments nest arrays and objects more than ${MAX_JSON_DEPTH} levels deep`, [
      { path: "(arguments)", message: `nests more than ${MAX_JSON_DEPTH} levels deep` },
    ]);
  }
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError("arguments are not representable as JSON");
  return text;
}

/** SHA-256 (hex) of the tool name and the canonical JSON of its arguments. */
export function fingerprint(tool: string, args: unknown): string {
  return fingerprintOfJson(tool, canonicalJson(args ?? null));
}

/** fingerprint() from the arguments' canonical JSON (canonicalJson(args ?? null)), for a caller that needs that JSON too. */
export function fingerprintOfJson(tool: string, canonical: string): string {
  // one-shot: the same digest as a Hash object fed tool, "\n" and the JSON, without building one per call
  return hash("sha256", `${tool}\n${canonical}`, "hex");
}
